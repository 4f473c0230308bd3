import Foundation
import TidingsPluginAPI

/// A provider whose items the test sets.
package final class ScriptedProvider: Provider, @unchecked Sendable {
    package init() {}
    package var items: [Item] = []
    package var failure: PollError?
    package func poll(_ ctx: PollContext) async throws -> PollResult {
        if let failure { throw failure }
        return .snapshot(items)
    }
}

/// A sink that fails as scripted and records what it got.
package final class ScriptedSink: Sink, @unchecked Sendable {
    package init() {}
    package let lock = NSLock()
    package var failures: [DeliveryError] = []
    package var delivered: [String] = []
    package func deliver(_ events: [Event]) async throws {
        try lock.withLock {
            if !failures.isEmpty { throw failures.removeFirst() }
            delivered += events.map(\.id)
        }
    }
}
