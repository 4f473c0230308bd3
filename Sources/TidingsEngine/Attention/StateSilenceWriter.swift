import FoundationEssentials
import Synchronization
import TidingsPluginAPI

/// The ``SilenceWriter`` of a process whose sinks are built before its state is opened (the
/// configuration names the state directory): commands attach the store once they open it.
package final class StateSilenceWriter: SilenceWriter {
    private let store = Mutex<StateStore?>(nil)

    package struct NoState: Error, CustomStringConvertible {
        package var description: String { "the state database is not open" }
    }

    package init() {}

    /// From now on silences go into `store`.
    package func attach(_ store: StateStore) { self.store.withLock { $0 = store } }

    package func addSilence(matchers: [SilenceMatcher], comment: String, now: Date, until end: Date) throws -> Silence {
        guard let store = store.withLock({ $0 }) else { throw NoState() }
        return try SilenceStore.add(store, matchers: matchers, comment: comment, createdBy: Silence.defaultAuthor(), now: now, until: end)
    }
}
