import FoundationEssentials

#if canImport(Glibc)
    import Glibc
    import TidingsPluginAPI
    import TidingsEngine
    import TidingsSQLite
    import TidingsPOSIX
#endif

/// One state change told to the service manager (sd_notify(3)): a `KEY=VALUE` line.
package enum SystemdNotifyMessage: Equatable, Sendable {
    /// Start-up (or a reload) is complete: config and state are loaded.
    case ready
    /// A reload began, at this CLOCK_MONOTONIC time in microseconds (systemd ≥ 253 wants it
    /// to tell this reload from an earlier one; older versions ignore it).
    case reloading(monotonicMicroseconds: UInt64)
    /// Shutdown began.
    case stopping
    /// A free-form, one-line status (`systemctl status` shows it).
    case status(String)
    /// The keep-alive ping for `WatchdogSec=`.
    case watchdog

    /// `RELOADING=1` with the current monotonic time.
    package static var reloadingNow: SystemdNotifyMessage {
        .reloading(monotonicMicroseconds: SystemdNotifier.monotonicMicroseconds())
    }

    /// The message's lines, without a trailing newline. A status is made one line: the
    /// protocol is newline-separated, so a newline in it would start a forged assignment.
    var lines: String {
        switch self {
        case .ready: return "READY=1"
        case .reloading(let usec): return "RELOADING=1\nMONOTONIC_USEC=\(usec)"
        case .stopping: return "STOPPING=1"
        case .status(let text): return "STATUS=" + text.map { $0.isNewline ? " " : String($0) }.joined()
        case .watchdog: return "WATCHDOG=1"
        }
    }
}

/// Why a notification could not be sent.
package struct SystemdNotifyError: Error, CustomStringConvertible, Sendable {
    package let description: String
}

/// The sd_notify datagram protocol, without libsystemd: each call sends one datagram of
/// newline-separated `KEY=VALUE` lines to the `AF_UNIX` socket named by `$NOTIFY_SOCKET`,
/// a file system path (`/run/systemd/notify`) or, with a leading `@`, an abstract-namespace
/// name. Outside systemd (no `NOTIFY_SOCKET`) there is no notifier and nothing is sent.
package struct SystemdNotifier: Sendable {
    /// Where the service manager listens.
    package enum Address: Equatable, Sendable {
        case path(String)
        /// An abstract-namespace name, without the leading `@` (which stands for a NUL byte).
        case abstract(String)
        /// A value this implementation cannot send to (a relative path, `vsock:`…): every
        /// send fails with an error naming it, so the daemon can say so once.
        case unsupported(String)

        /// Parses a `NOTIFY_SOCKET` value; nil when it is empty.
        package init?(_ value: String) {
            if value.isEmpty { return nil }
            if value.hasPrefix("/") {
                self = .path(value)
            } else if value.hasPrefix("@") {
                self = .abstract(String(value.dropFirst()))
            } else {
                self = .unsupported(value)
            }
        }
    }

    package let address: Address

    package init(address: Address) { self.address = address }

    /// The notifier for `$NOTIFY_SOCKET`; nil when it is unset or empty (not run by systemd
    /// with `Type=notify`): the caller then notifies nobody.
    package init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let value = environment["NOTIFY_SOCKET"], let address = Address(value) else { return nil }
        self.address = address
    }

    /// Sends the messages as one datagram. Never blocks: a full socket buffer is an error.
    package func send(_ messages: SystemdNotifyMessage...) throws(SystemdNotifyError) {
        try send(messages)
    }

    package func send(_ messages: [SystemdNotifyMessage]) throws(SystemdNotifyError) {
        let payload = Array((messages.map(\.lines).joined(separator: "\n") + "\n").utf8)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let name: [UInt8]
        switch address {
        case .path(let p): name = Array(p.utf8) + [0]
        case .abstract(let a): name = [0] + Array(a.utf8)
        case .unsupported(let v):
            throw SystemdNotifyError(description: "NOTIFY_SOCKET=\(v) is not an AF_UNIX socket path or @abstract name; not notifying systemd")
        }
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard name.count <= capacity else {
            throw SystemdNotifyError(description: "NOTIFY_SOCKET \(self) is longer than \(capacity) bytes")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: name) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + name.count)

        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure("socket") }
        defer { close(fd) }
        let sent = payload.withUnsafeBytes { bytes in
            withUnsafePointer(to: &addr) { sa in
                sa.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT), $0, length)
                }
            }
        }
        guard sent == payload.count else { throw failure("send to") }
    }

    private func failure(_ call: String) -> SystemdNotifyError {
        SystemdNotifyError(description: "cannot \(call) NOTIFY_SOCKET \(self): \(String(cString: strerror(errno)))")
    }

    /// CLOCK_MONOTONIC in microseconds, the clock of `MONOTONIC_USEC`.
    package static func monotonicMicroseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1_000
    }

    /// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC` (as sd_watchdog_enabled(3)
    /// advises), or nil when no watchdog is set for this process: `WATCHDOG_USEC` unset, not a
    /// positive integer, or `WATCHDOG_PID` naming another process (the variables were
    /// inherited from a parent the service manager watches, not meant for us).
    package static func watchdogInterval(
        environment env: [String: String] = ProcessInfo.processInfo.environment, pid: Int32 = getpid()
    ) -> Duration? {
        guard let text = env["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 else { return nil }
        if let owner = env["WATCHDOG_PID"], Int32(owner) != pid { return nil }
        return .microseconds(usec / 2)
    }
}

extension SystemdNotifier: CustomStringConvertible {
    /// The address as `NOTIFY_SOCKET` writes it.
    package var description: String {
        switch address {
        case .path(let p): return p
        case .abstract(let a): return "@" + a
        case .unsupported(let v): return v
        }
    }
}
