import FoundationEssentials
import Logging

/// Why a delivery failed, in the terms the outbox acts on.
package struct DeliveryError: Error, CustomStringConvertible, Sendable {
    package enum Category: String, Sendable {
        /// Try again later with backoff (network error, timeout, 5xx, 429, no notification server).
        case retryable
        /// This event will never be accepted (4xx): record it as dead, move on.
        case permanent
        /// The endpoint is gone (HTTP 410): stop using this sink until reload.
        case gone
    }

    package var category: Category
    package var message: String
    package var retryAfter: TimeInterval?

    package init(_ category: Category, _ message: String, retryAfter: TimeInterval? = nil) {
        self.category = category
        self.message = Redactor.shared.scrub(message)
        self.retryAfter = retryAfter
    }

    package var description: String { message }
}

/// A delivery channel. Retries, ordering and durability live in the outbox, not here.
package protocol Sink: Sendable {
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
    package var acceptsBatches: Bool { false }
    package var rendersDigests: Bool { false }
    package func deliverDigest(_ digest: Digest) async throws { try await deliver(digest.events) }
    package func shutdown() async {}
}

/// What a sink factory gets while a sink is being configured.
package struct SinkSetup: Sendable {
    package var name: String
    package var logger: Logger
    /// The process's shared HTTP client (one libcurl thread for every provider and sink).
    /// Sinks send through it, normally via the sinks module's `HTTPDelivery`; none builds its own.
    package var http: any HTTPClient
    /// The process's shared SMTP transport (libcurl, on the same thread as ``http``).
    package var mail: any MailTransport
    /// Where a sink writes silences (the desktop's "Snooze 1h"); nil where none can be made.
    package var silences: (any SilenceWriter)?
    package init(name: String, logger: Logger, http: any HTTPClient, mail: any MailTransport) {
        self.name = name
        self.logger = logger
        self.http = http
        self.mail = mail
    }
}

/// A registered sink type: `type = "…"` and how to build one.
package struct SinkFactory: Sendable {
    package typealias Make = @Sendable (_ options: OptionReader, _ setup: SinkSetup) throws -> any Sink
    package var type: String
    package var summary: String
    package var make: Make
    package init(type: String, summary: String, make: @escaping Make) {
        self.type = type
        self.summary = summary
        self.make = make
    }
}

/// Sink types by name. The core looks them up here and knows none of them itself.
package struct SinkRegistry: Sendable {
    private var factories: [String: SinkFactory] = [:]
    package init(_ factories: [SinkFactory] = []) { factories.forEach { register($0) } }
    package mutating func register(_ f: SinkFactory) { factories[f.type] = f }
    package func factory(type: String) -> SinkFactory? { factories[type] }
    package var types: [String] { factories.keys.sorted() }
}
