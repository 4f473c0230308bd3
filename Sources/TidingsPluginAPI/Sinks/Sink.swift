import Foundation
import Logging

/// Why a delivery failed, in the terms the outbox acts on.
public struct DeliveryError: Error, CustomStringConvertible, Sendable {
    public enum Category: String, Sendable {
        /// Try again later with backoff (network error, timeout, 5xx, 429, no notification server).
        case retryable
        /// This event will never be accepted (4xx): record it as dead, move on.
        case permanent
        /// The endpoint is gone (HTTP 410): stop using this sink until reload.
        case gone
    }

    public var category: Category
    public var message: String
    public var retryAfter: TimeInterval?

    public init(_ category: Category, _ message: String, retryAfter: TimeInterval? = nil) {
        self.category = category
        self.message = Redactor.shared.scrub(message)
        self.retryAfter = retryAfter
    }

    public var description: String { message }
}

/// A delivery channel. Retries, ordering and durability live in the outbox, not here.
public protocol Sink: Sendable {
    /// Deliver events. Most sinks get one at a time; a sink with ``acceptsBatches``
    /// gets all events of one poll for it together.
    func deliver(_ events: [Event]) async throws
    /// Whether this sink wants one call per poll's batch instead of per event.
    var acceptsBatches: Bool { get }
    /// Whether this sink shows a ``Digest`` as one message (``deliverDigest(_:)``). Sinks that
    /// don't get a digest's events one by one.
    var rendersDigests: Bool { get }
    /// Deliver a digest as one message. Called only when ``rendersDigests`` is true.
    func deliverDigest(_ digest: Digest) async throws
    /// Called when the daemon stops or reloads.
    func shutdown() async
}

extension Sink {
    public var acceptsBatches: Bool { false }
    public var rendersDigests: Bool { false }
    public func deliverDigest(_ digest: Digest) async throws { try await deliver(digest.events) }
    public func shutdown() async {}
}

/// What a sink factory gets while a sink is being configured.
public struct SinkSetup: Sendable {
    public var name: String
    public var logger: Logger
    /// The process's shared HTTP client (one libcurl thread for every provider and sink).
    /// Sinks send through it, normally via the sinks module's `HTTPDelivery`; none builds its own.
    public var http: any HTTPClient
    /// The process's shared SMTP transport (libcurl, on the same thread as ``http``).
    public var mail: any MailTransport
    /// Where a sink writes silences (the desktop's "Snooze 1h"); nil where none can be made.
    package var silences: (any SilenceWriter)?
    public init(name: String, logger: Logger, http: any HTTPClient, mail: any MailTransport) {
        self.name = name
        self.logger = logger
        self.http = http
        self.mail = mail
    }
}

/// A registered sink type: `type = "…"` and how to build one.
public struct SinkFactory: Sendable {
    public typealias Make = @Sendable (_ options: OptionReader, _ setup: SinkSetup) throws -> any Sink
    public var type: String
    public var summary: String
    public var make: Make
    public init(type: String, summary: String, make: @escaping Make) {
        self.type = type
        self.summary = summary
        self.make = make
    }
}

/// Sink types by name. The core looks them up here and knows none of them itself.
public struct SinkRegistry: Sendable {
    private var factories: [String: SinkFactory] = [:]
    public init(_ factories: [SinkFactory] = []) { factories.forEach { register($0) } }
    public mutating func register(_ f: SinkFactory) { factories[f.type] = f }
    public func factory(type: String) -> SinkFactory? { factories[type] }
    public var types: [String] { factories.keys.sorted() }
}
