import CCurl
import FoundationEssentials
import Glibc
import Synchronization
import TidingsPluginAPI

/// ``MailboxReader`` through libcurl's IMAP client, for the connection only.
///
/// libcurl connects, secures (TLS or STARTTLS) and logs in (`CURLOPT_CONNECT_ONLY`: its IMAP
/// connect phase sends `CAPABILITY`, `STARTTLS` and `AUTHENTICATE`/`LOGIN`, nothing else); the
/// session then sends its commands itself (`curl_easy_send`) and reads each answer
/// (`curl_easy_recv`) with an ``IMAPAnswerFramer``, which skips every literal unread. libcurl's
/// own command path (`CURLOPT_CUSTOMREQUEST`) reads answers line by line, literals included, and
/// ends one at any line that starts with its (predictable) tag: a message whose text holds
/// `A005 OK` ended a `UID FETCH` early.
///
/// A session runs on a private ``CurlMultiLoop`` (one connection): the connected handle stays in
/// its multi handle, and every command runs on the loop's thread (``CurlMultiLoop/onLoop(_:)``).
extension CurlHTTPClient: MailboxReader {
    package func open(_ server: MailboxServer) async throws -> any MailboxSession {
        CurlMailboxSession(server)
    }
}

final class CurlMailboxSession: MailboxSession, @unchecked Sendable {
    let server: MailboxServer
    private let loop = CurlMultiLoop(maxConnectionsPerHost: 1, maxCachedConnections: 1)
    private let deadline: ContinuousClock.Instant

    private struct State {
        /// The logged-in connection's job (its handle, its error buffer), once connected.
        var connection: CurlMailboxConnect?
        /// Commands sent so far: each gets its own tag.
        var sent = 0
        /// The last command was answered: the connection is open and logged in.
        var alive = false
    }
    private let state = Mutex(State())

    init(_ server: MailboxServer) {
        self.server = server
        deadline = ContinuousClock.now + .milliseconds(Int64(min(max(server.timeout, 0.001), 1e9) * 1000))
    }

    deinit { loop.stop() }

    func command(_ command: String, limit: Int) async throws -> Data {
        guard !command.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
            throw MailboxError.refused(command: "the command", text: "contains a line break")
        }
        guard ContinuousClock.now < deadline else { throw MailboxError.timeout(server.timeout) }
        let limit = min(limit, Self.answerLimit)
        do {
            var greeting = Data()
            let connection: CurlMailboxConnect
            if let open = state.withLock({ $0.connection }) {
                connection = open
            } else {
                let seconds = Self.seconds(ContinuousClock.now.duration(to: deadline))
                connection = CurlMailboxConnect(server, timeout: seconds, limit: limit)
                greeting = try await loop.run(connection)
                state.withLock { $0.connection = connection }
            }
            let answer = try await exchange(command, on: connection, until: deadline, limit: limit - greeting.count)
            state.withLock { $0.alive = true }
            return greeting + answer
        } catch {
            state.withLock { $0.alive = false }
            throw error
        }
    }

    /// Our own LOGOUT, bounded: libcurl's LOGOUT when it closes a live connection would wait
    /// for the answer up to two minutes. After ours the server has closed the connection (or it
    /// is dead), and libcurl closes it at once when the loop stops.
    func close() async {
        // Only on a connection that answered its last command.
        if let connection = state.withLock({ $0.alive ? $0.connection : nil }) {
            let left = Self.seconds(ContinuousClock.now.duration(to: deadline))
            _ = try? await exchange("LOGOUT", on: connection, until: ContinuousClock.now + .milliseconds(Int64(min(max(left, 0.5), 5) * 1000)), limit: 4096)
        }
        loop.stop()
    }

    /// Sends `command` with a tag of its own and reads its answer, on the loop thread.
    private func exchange(_ command: String, on connection: CurlMailboxConnect, until deadline: ContinuousClock.Instant, limit: Int) async throws -> Data {
        let tag = "T" + String(state.withLock { s -> Int in
            s.sent += 1
            return s.sent
        })
        let cancelled = CancelFlag()
        let timeout = server.timeout
        return try await withTaskCancellationHandler {
            try await loop.onLoop {
                try connection.exchange(tag: tag, command: command, deadline: deadline, limit: limit, timeout: timeout, cancelled: cancelled)
            }
        } onCancel: {
            cancelled.flag.store(true, ordering: .relaxed)
        }
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// An answer's limit, whatever the caller asks: the provider fetches in batches below it.
    static let answerLimit = 128 << 10
}

/// Set by task cancellation; a command waiting for its answer looks at it between waits.
final class CancelFlag: Sendable {
    let flag = Atomic<Bool>(false)
}

/// The connection of a session on its ``CurlMultiLoop``: libcurl connects, secures and logs in
/// (`CURLOPT_CONNECT_ONLY`) and returns the lines of the greeting and login (the server's
/// capabilities); then ``exchange(tag:command:deadline:limit:timeout:cancelled:)`` runs each command.
final class CurlMailboxConnect: CurlJob, @unchecked Sendable {
    let server: MailboxServer
    let timeout: TimeInterval
    let limit: Int
    private let cancelled = Atomic<Bool>(false)
    var continuation: CheckedContinuation<Data, Error>?

    // Loop-thread state.
    private(set) var handle: UnsafeMutableRawPointer?
    private let errorBuffer = CurlErrorBuffer()
    private var answer = Data()
    /// The last complete line: on a failed login, the server's tagged `NO`.
    private var lastLine = Data()
    private var overflowed = false

    init(_ server: MailboxServer, timeout: TimeInterval, limit: Int) {
        self.server = server
        self.timeout = timeout
        self.limit = limit
    }

    var keepsConnection: Bool { true }
    var isCancelled: Bool { cancelled.load(ordering: .sequentiallyConsistent) }
    func markCancelled() { cancelled.store(true, ordering: .sequentiallyConsistent) }

    func configure(_ handle: UnsafeMutableRawPointer) {
        self.handle = handle
        let me = Unmanaged.passUnretained(self).toOpaque()
        let s = server
        tidings_curl_easy_setopt_str(handle, CURLOPT_URL, s.url.absoluteString)
        tidings_curl_easy_setopt_str(handle, CURLOPT_PROTOCOLS_STR, "imap,imaps")
        tidings_curl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        // Connect, TLS, CAPABILITY, STARTTLS, login; then the connection is ours.
        tidings_curl_easy_setopt_long(handle, CURLOPT_CONNECT_ONLY, 1)
        let ms = Int(min(max(timeout, 0.001), 1e9) * 1000)
        tidings_curl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, ms)
        tidings_curl_easy_setopt_ptr(handle, CURLOPT_ERRORBUFFER, errorBuffer.pointer)
        s.security.configure(handle, caFile: s.caFile)
        tidings_curl_easy_setopt_str(handle, CURLOPT_USERNAME, s.username)
        tidings_curl_easy_setopt_str(handle, CURLOPT_PASSWORD, s.password.value)
        tidings_curl_easy_setopt_callback(handle, CURLOPT_HEADERFUNCTION, curlMailboxLineCallback)
        tidings_curl_easy_setopt_ptr(handle, CURLOPT_HEADERDATA, me)
    }

    /// A line of the greeting or login (libcurl calls this per line); false = over the limit, abort.
    fileprivate func take(_ line: UnsafeRawBufferPointer) -> Bool {
        guard answer.count + line.count <= limit else {
            overflowed = true
            return false
        }
        answer.append(contentsOf: line)
        lastLine = Data(line)
        return true
    }

    func outcome(_ code: CURLcode) -> Result<Data, Error> {
        let detail = Redactor.shared.scrub(errorBuffer.message(code))
        if overflowed { return .failure(MailboxError.tooLarge(limit)) }
        switch code {
        case CURLE_OK:
            return .success(answer)
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(MailboxError.timeout(server.timeout))
        case _ where MailSecurity.certificateFailures.contains(code.rawValue):
            return .failure(MailboxError.certificate(MailSecurity.certificateProblem(detail, caFile: server.caFile)))
        case CURLE_USE_SSL_FAILED:
            return .failure(MailboxError.tls("\(detail) (imap:// requires STARTTLS: the server must offer it; or use imaps://)"))
        case CURLE_SSL_CONNECT_ERROR:
            return .failure(MailboxError.tls(detail))
        case CURLE_LOGIN_DENIED:
            // The tag (libcurl's, e.g. "A004") says nothing to a reader.
            var words = IMAPAnswerFramer.text(lastLine)
            if !words.hasPrefix("*"), let space = words.firstIndex(of: " ") { words = String(words[words.index(after: space)...]) }
            words = Self.serverWords(words)
            // RFC 5530: [UNAVAILABLE] is the server's trouble, not the credentials'.
            if words.uppercased().firstRange(of: "[UNAVAILABLE]") != nil {
                return .failure(MailboxError.unreachable("login failed for now: \(words)"))
            }
            return .failure(MailboxError.loginRefused(words.isEmpty ? detail : words))
        case CURLE_WEIRD_SERVER_REPLY:
            return .failure(MailboxError.unreachable("unreadable IMAP answer: \(detail)"))
        default:
            return .failure(MailboxError.unreachable(detail))
        }
    }

    /// The server's words for a message: scrubbed, then cut (a secret across the cut is gone whole).
    static func serverWords(_ text: String) -> String {
        Redactor.shared.shortened(text, to: 300)
    }

    /// The command's verb for messages (`UID FETCH`, `EXAMINE`), never its arguments.
    static func verb(_ command: String) -> String {
        let words = command.split(separator: " ", maxSplits: 2)
        guard let w = words.first else { return "the command" }
        return w.uppercased() == "UID" && words.count > 1 ? "UID \(words[1].uppercased())" : w.uppercased()
    }

    // MARK: - Commands (on the loop thread)

    /// Sends `tag command` and reads up to its tagged completion; every literal of the answer is
    /// skipped unread by the framer. Waits at most until `deadline`.
    func exchange(tag: String, command: String, deadline: ContinuousClock.Instant, limit: Int, timeout: TimeInterval, cancelled: CancelFlag) throws -> Data {
        guard let handle else { throw MailboxError.unreachable("the IMAP connection is closed") }
        var fd: curl_socket_t = -1
        guard tidings_curl_easy_getinfo_socket(handle, CURLINFO_ACTIVESOCKET, &fd) == CURLE_OK, fd != -1 else {
            throw MailboxError.unreachable("the server closed the IMAP connection during the poll")
        }
        let verb = Self.verb(command)
        /// Waits until `fd` is ready for `events`; throws past the deadline or on cancellation.
        func wait(_ events: Int16) throws {
            if cancelled.flag.load(ordering: .relaxed) { throw CancellationError() }
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { throw MailboxError.timeout(timeout) }
            var p = pollfd(fd: fd, events: events, revents: 0)
            _ = poll(&p, 1, Int32(min(CurlMailboxSession.seconds(left) * 1000 + 1, 200)))
        }
        func failure(_ code: CURLcode, _ doing: String) -> MailboxError {
            .unreachable("\(doing) failed: \(Redactor.shared.scrub(errorBuffer.message(code)))")
        }

        errorBuffer.pointer[0] = 0
        let line = Array("\(tag) \(command)\r\n".utf8)
        var sent = 0
        while sent < line.count {
            var n = 0
            let code = line[sent...].withUnsafeBytes { tidings_curl_easy_send(handle, $0.baseAddress, $0.count, &n) }
            switch code {
            case CURLE_OK: sent += n
            case CURLE_AGAIN: try wait(Int16(POLLOUT))
            default: throw failure(code, "sending \(verb)")
            }
        }

        var framer = IMAPAnswerFramer(tag: tag)
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            var n = 0
            let code = buffer.withUnsafeMutableBytes { tidings_curl_easy_recv(handle, $0.baseAddress, $0.count, &n) }
            switch code {
            case CURLE_OK where n > 0:
                let end = framer.take(buffer[..<n])
                if end == nil, framer.bytes.count > limit { throw MailboxError.tooLarge(limit) }
                switch end {
                case nil: continue
                case .tagged(let status, let text)?:
                    guard status == "OK" else { throw MailboxError.refused(command: verb, text: Self.serverWords(text)) }
                    return Data(framer.bytes[..<framer.length])
                case .bye(let text)?:
                    // A LOGOUT is answered with BYE, then its tagged OK; any other command is over.
                    if verb == "LOGOUT" { return Data(framer.bytes[..<framer.length]) }
                    throw MailboxError.unreachable("the server ended the session: \(Self.serverWords(text))")
                }
            case CURLE_OK:  // nothing read: the server closed the connection
                throw MailboxError.unreachable("the server closed the IMAP connection during the poll")
            case CURLE_AGAIN:
                try wait(Int16(POLLIN))
            default:
                throw failure(code, "reading the answer to \(verb)")
            }
        }
    }
}

private func curlMailboxLineCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ me: UnsafeMutableRawPointer?) -> Int {
    guard let me else { return 0 }
    let ok = Unmanaged<CurlMailboxConnect>.fromOpaque(me).takeUnretainedValue().take(UnsafeRawBufferPointer(start: data, count: size * count))
    return ok ? size * count : 0
}
