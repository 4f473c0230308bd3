import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1:<free port> for the HTTP client tests: one thread per
/// connection, keep-alive, and replies a test scripts per request (including never answering,
/// chunked bodies and bodies that never end). Counts connections so tests can see reuse.
package final class LoopbackHTTPServer: @unchecked Sendable {
    package struct Request: Sendable {
        package var method: String
        /// The request target as sent (a path, or an absolute URL through a proxy).
        package var target: String
        /// Lower-cased names.
        package var headers: [String: String]
        package var body: Data
    }

    package enum Reply: Sendable {
        case respond(status: Int, headers: [(String, String)] = [], body: Data = Data(), chunked: Bool = false)
        /// Reads the request and never answers (until the server stops).
        case never
        /// Chunks of 1 KiB until the client goes away.
        case endless
    }

    package let port: Int
    private let listener: Int32
    private let handler: @Sendable (Request) -> Reply
    private struct Shared {
        var requests: [Request] = []
        var connections = 0
        var open: Set<Int32> = []
        var stopped = false
    }
    private let shared = Mutex(Shared())

    package init(_ handler: @escaping @Sendable (Request) -> Reply) throws {
        self.handler = handler
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, len) == 0 && listen(listener, 1024) == 0 && getsockname(listener, $0, &len) == 0
            }
        }
        guard ok else { throw POSIXError(.EADDRINUSE) }
        port = Int(UInt16(bigEndian: addr.sin_port))
        let t = Thread { [self] in acceptLoop() }
        t.start()
    }

    package var url: String { "http://127.0.0.1:\(port)" }
    package var requests: [Request] { shared.withLock { $0.requests } }
    package var connections: Int { shared.withLock { $0.connections } }

    /// Idempotent. Sockets are shut down under the lock (a connection closes only after leaving
    /// `open`, so no number here was reused); the accept thread closes the listener.
    package func stop() {
        shared.withLock { s in
            guard !s.stopped else { return }
            s.stopped = true
            shutdown(listener, Int32(SHUT_RDWR))
            for fd in s.open { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    deinit { stop() }

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else {
                if errno == EINTR { continue }
                close(listener)
                return
            }
            let accepted = shared.withLock { s -> Bool in
                guard !s.stopped else { return false }
                s.connections += 1
                s.open.insert(fd)
                return true
            }
            guard accepted else {
                close(fd)
                close(listener)
                return
            }
            var yes: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            let t = Thread { [self] in serve(fd) }
            t.start()
        }
    }

    private func serve(_ fd: Int32) {
        defer {
            shared.withLock { _ = $0.open.remove(fd) }
            close(fd)
        }
        var buffer = [UInt8]()
        func fill() -> Bool {
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = read(fd, &chunk, chunk.count)
            guard n > 0 else { return false }
            buffer.append(contentsOf: chunk[0..<n])
            return true
        }
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while true {
            var headEnd: Int? = nil
            while headEnd == nil {
                if buffer.count >= 4 {
                    headEnd = (0...(buffer.count - 4)).first { buffer[$0..<$0 + 4].elementsEqual(end) }
                }
                if headEnd == nil, !fill() { return }
            }
            let head = String(decoding: buffer[0..<headEnd!], as: UTF8.self)
            buffer.removeFirst(headEnd! + 4)
            var lines = head.components(separatedBy: "\r\n")
            let requestLine = lines.removeFirst().split(separator: " ")
            guard requestLine.count >= 2 else { return }
            var headers: [String: String] = [:]
            for line in lines {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            let length = Int(headers["content-length"] ?? "0") ?? 0
            while buffer.count < length { if !fill() { return } }
            let request = Request(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers, body: Data(buffer[0..<length]))
            buffer.removeFirst(length)
            shared.withLock { $0.requests.append(request) }

            switch handler(request) {
            case .never:
                while fill() {}
                return
            case .endless:
                guard send(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") else { return }
                let chunk = "400\r\n" + String(repeating: "x", count: 1024) + "\r\n"
                while send(fd, chunk) {}
                return
            case .respond(let status, let extra, let body, let chunked):
                var out = "HTTP/1.1 \(status) Status\r\n"
                for (k, v) in extra { out += "\(k): \(v)\r\n" }
                out += chunked ? "Transfer-Encoding: chunked\r\n\r\n" : "Content-Length: \(body.count)\r\n\r\n"
                var head = Data(out.utf8)
                if !chunked && request.method != "HEAD" { head.append(body) }
                guard send(fd, head) else { return }
                if chunked {
                    var offset = 0
                    while offset < body.count {
                        let n = min(1000, body.count - offset)
                        guard send(fd, String(n, radix: 16) + "\r\n"), send(fd, body[offset..<offset + n]), send(fd, "\r\n") else { return }
                        offset += n
                    }
                    guard send(fd, "0\r\n\r\n") else { return }
                }
            }
        }
    }

    private func send(_ fd: Int32, _ text: String) -> Bool { send(fd, Data(text.utf8)) }

    private func send(_ fd: Int32, _ data: Data) -> Bool {
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                guard n > 0 else { return false }
                offset += n
            }
            return true
        }
    }
}
