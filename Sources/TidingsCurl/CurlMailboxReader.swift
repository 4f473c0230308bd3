import CCurl
import Foundation
import Synchronization
import TidingsPluginAPI

/// ``MailboxReader`` through libcurl's IMAP client.
///
/// A session runs on a private ``CurlMultiLoop`` (its own connection cache, one connection), not
/// the shared one: the commands of a session depend on the mailbox `EXAMINE` opened on *that*
/// connection, and a shared cache could hand it to another source of the same account between
/// two commands. Every command after the first must reuse the connection (checked with
/// `CURLINFO_NUM_CONNECTS`); a new one would have no mailbox open.
///
/// Each command is a `CURLOPT_CUSTOMREQUEST` on a URL without a mailbox, so libcurl never sends
/// `SELECT` or a `FETCH` of its own (its URL fetch marks messages seen). libcurl hands every line
/// of the answer, literals included, to the header callback; that is what a command returns.
extension CurlHTTPClient: MailboxReader {
    package func open(_ server: MailboxServer) async throws -> any MailboxSession {
        CurlMailboxSession(server)
    }
}

final class CurlMailboxSession: MailboxSession, @unchecked Sendable {
    let server: MailboxServer
    private let loop = CurlMultiLoop(maxConnectionsPerHost: 1, maxCachedConnections: 1)
    private let deadline: ContinuousClock.Instant
    /// Commands sent so far (only one at a time: the provider awaits each).
    private let sent = Mutex(0)
    /// The last command succeeded: the connection is open and logged in.
    private let alive = Mutex(false)

    init(_ server: MailboxServer) {
        self.server = server
        deadline = ContinuousClock.now + .milliseconds(Int64(min(max(server.timeout, 0.001), 1e9) * 1000))
    }

    deinit { loop.stop() }

    func command(_ command: String, limit: Int) async throws -> Data {
        guard !command.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
            throw MailboxError.refused(command: "the command", text: "contains a line break")
        }
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .zero else { throw MailboxError.timeout(server.timeout) }
        return try await run(command, seconds: Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18, limit: limit)
    }

    private func run(_ command: String, seconds: Double, limit: Int) async throws -> Data {
        let first = sent.withLock { n -> Bool in
            n += 1
            return n == 1
        }
        do {
            let answer = try await loop.run(CurlMailboxCommand(server, command: command, timeout: seconds, limit: min(limit, Self.answerLimit), first: first))
            alive.withLock { $0 = true }
            return answer
        } catch {
            alive.withLock { $0 = false }
            throw error
        }
    }

    /// Our own LOGOUT, bounded: libcurl's LOGOUT when it closes a live connection would wait
    /// for the answer up to two minutes, wherever the loop happens to be released. After ours
    /// the server has closed the connection (or it is dead), and libcurl's costs nothing.
    func close() async {
        // Only on a connection that answered its last command: never a new login to log out.
        if alive.withLock({ $0 }) {
            let left = ContinuousClock.now.duration(to: deadline)
            let seconds = min(max(Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18, 0.5), 5)
            _ = try? await run("LOGOUT", seconds: seconds, limit: 4096)
        }
        loop.stop()
    }

    /// libcurl fails a transfer whose answer lines pass 300 KB in all (it counts an untagged
    /// line twice: as "header" and as "body"); below that, this port's own limit cuts an answer
    /// first, with its own message.
    static let answerLimit = 128 << 10
}

/// One IMAP command on a ``CurlMultiLoop``: libcurl connects and logs in if it has no
/// connection yet, sends the command with its own tag, and reads up to the tagged completion.
final class CurlMailboxCommand: CurlJob, @unchecked Sendable {
    let server: MailboxServer
    let command: String
    let timeout: TimeInterval
    let limit: Int
    /// The session's first command, which may (must) make the connection.
    let first: Bool
    private let cancelled = Atomic<Bool>(false)
    var continuation: CheckedContinuation<Data, Error>?

    // Loop-thread state.
    private(set) var handle: UnsafeMutableRawPointer?
    private let errorBuffer = CurlErrorBuffer()
    private var answer = Data()
    /// The last complete line: on a failure, the server's tagged `NO`/`BAD`.
    private var lastLine = Data()
    private var overflowed = false

    init(_ server: MailboxServer, command: String, timeout: TimeInterval, limit: Int, first: Bool) {
        self.server = server
        self.command = command
        self.timeout = timeout
        self.limit = limit
        self.first = first
    }

    static let bufferSize = 1 << 20
    /// libcurl's `CURL_MAX_HTTP_HEADER`, which bounds an IMAP answer too.
    static let curlLimit = 300 * 1024

    var isCancelled: Bool { cancelled.load(ordering: .sequentiallyConsistent) }
    func markCancelled() { cancelled.store(true, ordering: .sequentiallyConsistent) }

    /// The command's verb for messages (`UID FETCH`, `EXAMINE`), never its arguments.
    var verb: String {
        let words = command.split(separator: " ", maxSplits: 2)
        guard let w = words.first else { return "the command" }
        return w.uppercased() == "UID" && words.count > 1 ? "UID \(words[1].uppercased())" : w.uppercased()
    }

    func configure(_ handle: UnsafeMutableRawPointer) {
        self.handle = handle
        let me = Unmanaged.passUnretained(self).toOpaque()
        let s = server
        tidings_curl_easy_setopt_str(handle, CURLOPT_URL, s.url.absoluteString)
        tidings_curl_easy_setopt_str(handle, CURLOPT_PROTOCOLS_STR, "imap,imaps")
        tidings_curl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        let ms = Int(min(max(timeout, 0.001), 1e9) * 1000)
        tidings_curl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, ms)
        tidings_curl_easy_setopt_ptr(handle, CURLOPT_ERRORBUFFER, errorBuffer.pointer)
        // libcurl keeps only the head of an answer line longer than half its buffer: a plain
        // `* SEARCH` of many UIDs is one long line (up to the answer limit: about 18,000 UIDs).
        tidings_curl_easy_setopt_long(handle, CURLOPT_BUFFERSIZE, Self.bufferSize)
        s.security.configure(handle, caFile: s.caFile)
        tidings_curl_easy_setopt_str(handle, CURLOPT_USERNAME, s.username)
        tidings_curl_easy_setopt_str(handle, CURLOPT_PASSWORD, s.password.value)
        tidings_curl_easy_setopt_str(handle, CURLOPT_CUSTOMREQUEST, command)
        tidings_curl_easy_setopt_callback(handle, CURLOPT_HEADERFUNCTION, curlMailboxLineCallback)
        tidings_curl_easy_setopt_ptr(handle, CURLOPT_HEADERDATA, me)
        // Untagged lines also arrive as "body": dropped (they are in the header callback).
        tidings_curl_easy_setopt_callback(handle, CURLOPT_WRITEFUNCTION, curlMailboxDiscardCallback)
    }

    /// A line of the answer (libcurl calls this per line); false = over the limit, abort.
    fileprivate func take(_ line: UnsafeRawBufferPointer) -> Bool {
        guard answer.count + line.count <= limit else {
            overflowed = true
            return false
        }
        answer.append(contentsOf: line)
        lastLine = Data(line)
        return true
    }

    /// The server's last line, printable and short, for an error message.
    private var serverWords: String {
        var words = String(decoding: lastLine, as: UTF8.self).unicodeScalars
            .filter { $0.value >= 0x20 && $0.value != 0x7f }.reduce(into: "") { $0.unicodeScalars.append($1) }
            .trimmingCharacters(in: .whitespaces)
        // The tag (libcurl's, e.g. "A004") says nothing to a reader.
        if let space = words.firstIndex(of: " "), !words.hasPrefix("*") { words = String(words[words.index(after: space)...]) }
        return Redactor.shared.shortened(words, to: 300)
    }

    func outcome(_ code: CURLcode) -> Result<Data, Error> {
        let detail = Redactor.shared.scrub(errorBuffer.message(code))
        if overflowed { return .failure(MailboxError.tooLarge(limit)) }
        // libcurl's own bound on what one command's answer may hold (300 KB, counted its way).
        if code != CURLE_OK, detail.hasPrefix("Too large response headers") { return .failure(MailboxError.tooLarge(Self.curlLimit)) }
        switch code {
        case CURLE_OK:
            var connects = 0
            if let handle { tidings_curl_easy_getinfo_long(handle, CURLINFO_NUM_CONNECTS, &connects) }
            if !first && connects > 0 {
                return .failure(MailboxError.unreachable("the server closed the IMAP connection during the poll"))
            }
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
            let words = serverWords
            // RFC 5530: [UNAVAILABLE] is the server's trouble, not the credentials'.
            if words.uppercased().contains("[UNAVAILABLE]") {
                return .failure(MailboxError.unreachable("login failed for now: \(words)"))
            }
            return .failure(MailboxError.loginRefused(words.isEmpty ? detail : words))
        case CURLE_QUOTE_ERROR:
            return .failure(MailboxError.refused(command: verb, text: serverWords))
        case CURLE_WEIRD_SERVER_REPLY:
            return .failure(MailboxError.unreachable("unreadable IMAP answer: \(detail)"))
        default:
            return .failure(MailboxError.unreachable(detail))
        }
    }
}

private func curlMailboxLineCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ me: UnsafeMutableRawPointer?) -> Int {
    guard let me else { return 0 }
    let ok = Unmanaged<CurlMailboxCommand>.fromOpaque(me).takeUnretainedValue().take(UnsafeRawBufferPointer(start: data, count: size * count))
    return ok ? size * count : 0
}

private func curlMailboxDiscardCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ me: UnsafeMutableRawPointer?) -> Int {
    size * count
}
