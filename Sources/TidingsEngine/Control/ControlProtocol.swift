import TidingsPluginAPI

/// The control socket of `tidings run` (DESIGN §7): where it is, its version and its bounds.
///
/// Line-oriented JSON over a Unix stream socket `tidings.sock` in the state directory
/// (mode 0600; the daemon also checks the peer's uid: the same user or root). The client
/// sends one ``ControlRequest`` line; the daemon answers with ``ControlReply`` lines and
/// closes. Every line carries `"v": 1`; a peer that speaks another version gets an `error`.
package enum ControlProtocol {
    package static let version = 1
    package static let socketName = "tidings.sock"

    /// A request line is at most this long; a longer one is refused.
    package static let maxRequestBytes = 64 * 1024
    /// A reply line (one event) is at most this long for the client (events carry data of
    /// up to `max_body`, 10 MiB by default).
    package static let maxReplyBytes = 64 * 1024 * 1024
    /// The daemon waits this long for the whole request line, then hangs up.
    package static let requestTimeout: Double = 5
    /// While polls run, the daemon sends a `wait` line this often.
    package static let heartbeat: Double = 2
    /// The daemon gives up on a client that takes no bytes for this long (the polls still
    /// finish and their events are delivered).
    package static let writeStall: Double = 10
    /// The client gives up on a daemon that sends nothing for this long.
    package static let clientIdle: Double = 15
    /// Connections served at once; more are told the daemon is busy (``ControlReply/busy(_:)``).
    package static let maxConnections = 16
    /// A client turned away as busy asks again after this pause: from 50 ms, doubling up to
    /// 1 s, jittered by half so that clients turned away together come back apart.
    package static let busyRetry = RetryPolicy(first: 0.05, cap: 1, jitter: 0.5)

    package static func socketPath(in stateDirectory: String) -> String { "\(stateDirectory)/\(socketName)" }
}
