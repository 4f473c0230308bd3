import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle
import TidingsCrypto
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI

/// The `[http] listen` endpoint: ``MonitoringRoutes`` over HTTP/1.1 (Hummingbird), bounded so
/// that hostile clients, even on loopback, cannot hurt the daemon: at most ``maxConnections``
/// requests served at once (``maxWaitingRequests`` more wait, further ones 503), the health
/// checks answered ahead of them (``ConnectionAdmission``), at most ``maxIdleConnections``
/// connections without a request in flight (the one idle longest is closed), at most
/// ``maxOpenConnections`` open (further ones wait in the kernel's backlog), request heads of at
/// most ``maxHeaderBytes``, a connection closed after ``idleTimeout`` without a byte and
/// ``maxConnectionAge`` after it opened whatever it does, and no request bodies.
package final class MonitoringServer: Sendable {
    /// Requests (other than the health checks) served at once.
    package static let maxConnections = 16
    package static let maxWaitingRequests = 16
    /// `/-/healthy` and `/-/ready` answered at once, besides those.
    package static let maxProbes = 8
    package static let maxIdleConnections = 32
    package static let maxOpenConnections = maxConnections + maxWaitingRequests + maxProbes + maxIdleConnections + 16
    package static let maxHeaderBytes = 16 * 1024
    package static let idleTimeout: TimeAmount = .seconds(10)
    package static let maxConnectionAge: TimeAmount = .seconds(30)

    /// How long ``stop()`` lets open connections finish before it closes them.
    package static let stopGrace: Duration = .seconds(5)

    package let address: ListenAddress
    /// Runs the application; a graceful shutdown of it is how the server stops.
    private let group: ServiceGroup
    private let task: Task<Void, Never>

    private init(address: ListenAddress, group: ServiceGroup, task: Task<Void, Never>) {
        self.address = address
        self.group = group
        self.task = task
    }

    /// Serves `routes` on `address` until ``stop()``. Throws when it cannot listen there (the
    /// port is taken, the address is not this machine's).
    /// The status page answers every other path when `pages` has `status_page = true`; its
    /// `[http.auth]` also guards `/metrics`.
    package static func start(_ address: ListenAddress, routes: MonitoringRoutes, pages: StatusPages? = nil, logger: Logger) async throws -> MonitoringServer {
        let (started, starting) = AsyncStream<Result<Void, any Error>>.makeStream()
        // Hummingbird says "Server started" at info; the caller says where it serves, once.
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .notice)
        let admission = ConnectionAdmission(
            maxServing: maxConnections, maxWaiting: maxWaitingRequests, maxProbes: maxProbes, maxIdle: maxIdleConnections)
        let app = Application(
            responder: CallbackResponder<ConnectionContext> { request, context in
                let probe = MonitoringRoutes.probes.contains(request.uri.path)
                guard await admission.begin(context.channel, probe: probe) else {
                    var r = MonitoringResponse.text(503, probe ? "busy: too many health checks at once" : "busy: \(maxConnections) requests are being served and \(maxWaitingRequests) wait")
                    r.headers["Connection"] = "close"
                    r.headers["Retry-After"] = "1"
                    return Response(r)
                }
                defer { admission.end(context.channel, probe: probe) }
                return await Self.respond(request, address: address, routes: routes, pages: pages)
            },
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [ConnectionDeadline(after: maxConnectionAge, admission: admission)],
                    idleTimeout: idleTimeout,
                    httpDecoderConfiguration: .init(maxHeaderFieldSize: maxHeaderBytes, maxHeaderListSize: maxHeaderBytes, maxHeaderFieldCount: 100))),
            configuration: .init(
                address: .hostname(address.host, port: Int(address.port)), serverName: nil,
                availableConnectionsDelegate: MaximumAvailableConnections(maxOpenConnections, logger: quiet)),
            onServerRunning: { _ in starting.yield(.success(())) },
            logger: quiet)
        // Its own group, no signals: the daemon decides when it stops (``stop()``).
        let group = ServiceGroup(configuration: .init(services: [app], logger: quiet))
        let task = Task {
            do { try await group.run() } catch { starting.yield(.failure(error)) }
            starting.finish()
        }
        for await result in started {
            switch result {
            case .success: return MonitoringServer(address: address, group: group, task: task)
            case .failure(let error): throw MonitoringServerError(address: address, reason: "\(error)")
            }
        }
        throw MonitoringServerError(address: address, reason: "the server ended before it listened")
    }

    /// One request, let in by ``ConnectionAdmission``.
    private static func respond(_ request: Request, address: ListenAddress, routes: MonitoringRoutes, pages: StatusPages?) async -> Response {
        let hasBody = request.headers[.transferEncoding] != nil || (request.headers[.contentLength].map { $0 != "0" } ?? false)
        let path = request.uri.path
        // DNS rebinding: only requests for this listener; probes whatever their Host
        // (they show nothing but whether the daemon is up, and a prober may use any address).
        if !MonitoringRoutes.probes.contains(path) {
            let hosts = HostPolicy(listen: address, allowed: pages?.current?.allowedHosts ?? [])
            guard hosts.allowsHost(request.head.authority) else { return Response(hosts.misdirected) }
        }
        // The status page's CSRF tokens and [http.auth]'s comparison use libcrypto, loaded by the
        // first request that needs it (not linked, not at start: DESIGN §15); missing, those
        // requests are refused saying why, and the probes go on.
        let needsCrypto = path == "/metrics" ? pages?.current?.auth != nil : !MonitoringRoutes.paths.contains(path) && pages?.current?.statusPage == true
        if needsCrypto, let missing = libcryptoUnavailable() {
            return Response(MonitoringResponse.text(503, "unavailable: \(missing)"))
        }
        if MonitoringRoutes.paths.contains(path) {
            if path == "/metrics", let auth = pages?.current?.auth, !WebSecurity.authorized(request.headers[.authorization], auth) {
                var r = MonitoringResponse.text(401, "authentication required")
                r.headers["WWW-Authenticate"] = WebSecurity.challenge(auth)
                return Response(r)
            }
        } else if let pages, pages.current?.statusPage == true {
            return Response(await Self.page(request, pages: pages, hasBody: hasBody))
        }
        return Response(routes.respond(method: request.method.rawValue, path: path, hasBody: hasBody))
    }

    /// A request to the status page: a POST's form body (at most ``StatusPages/maxBody``) read first.
    private static func page(_ request: Request, pages: StatusPages, hasBody: Bool) async -> MonitoringResponse {
        var body: [UInt8] = []
        if request.method == .post && hasBody {
            do {
                let buffer = try await request.body.collect(upTo: StatusPages.maxBody)
                body = Array(buffer.readableBytesView)
            } catch {
                var r = MonitoringResponse.text(413, "a form of at most \(StatusPages.maxBody) bytes")
                r.headers["Connection"] = "close"
                return r
            }
        } else if hasBody {
            return .text(413, "a \(request.method.rawValue) has no body")
        }
        var headers: [String: String] = [:]
        for field in request.headers where headers[field.name.canonicalName] == nil { headers[field.name.canonicalName] = field.value }
        if let authority = request.head.authority { headers["host"] = authority }
        let web = WebRequest(method: request.method.rawValue, path: request.uri.path, query: request.uri.query ?? "", headers: headers, body: body)
        return await pages.respond(web) ?? .text(404, "not found")
    }

    /// Stops listening and closes the open connections: a graceful shutdown (no new
    /// connections, idle ones closed, a request in flight answered), cut short by cancelling
    /// after ``stopGrace``. Cancelling alone made Hummingbird log an error on every clean stop
    /// ("Waiting on child channel: CancellationError()").
    package func stop() async {
        await group.triggerGracefulShutdown()
        let task = self.task
        let deadline = Task {
            try? await Task.sleep(for: Self.stopGrace)
            if !Task.isCancelled { task.cancel() }
        }
        await task.value
        deadline.cancel()
    }
}

package struct MonitoringServerError: Error, CustomStringConvertible {
    package var address: ListenAddress
    package var reason: String
    package var description: String { "cannot serve [http] on \(address): \(reason)" }
}

extension Response {
    init(_ r: MonitoringResponse) {
        var headers: HTTPFields = [.contentType: r.contentType]
        if let allow = r.allow { headers[.allow] = allow }
        if r.status == 413 { headers[.connection] = "close" }
        for (name, value) in r.headers {
            if let n = HTTPFields.Element.Name(name) { headers[n] = value }
        }
        self.init(status: .init(code: r.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: r.body)))
    }
}

/// The request context: Hummingbird's, and the connection a request came on (for ``ConnectionAdmission``).
struct ConnectionContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// Closes a connection a fixed time after it opened, whatever it is doing: a client that
/// trickles bytes just faster than the idle timeout cannot keep a connection. Tells
/// ``ConnectionAdmission`` of the connection.
private final class ConnectionDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    private let limit: TimeAmount
    private let admission: ConnectionAdmission
    private var deadline: Scheduled<Void>?

    init(after limit: TimeAmount, admission: ConnectionAdmission) {
        self.limit = limit
        self.admission = admission
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: limit) { channel.close(promise: nil) }
        admission.opened(channel)
    }

    func handlerRemoved(context: ChannelHandlerContext) { deadline?.cancel() }
}
