import Synchronization

/// Values that many sources hold equal, made once and shared: 100,000 plugin files of one
/// shape hold the same settings, folder and field templates, and each copy was its own
/// allocation (issue 33). Bounded: past `limit` distinct keys a value is made and not kept, so
/// a configuration where every source differs costs no more than before.
package final class SharedValues<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private let known = Mutex<[Key: Value]>([:])
    private let limit: Int

    package init(limit: Int = 4096) { self.limit = limit }

    /// The value kept for `key`, else `make(key)` (kept while there is room).
    package func value(_ key: Key, _ make: (Key) -> Value) -> Value {
        known.withLock { known in
            if let v = known[key] { return v }
            let v = make(key)
            if known.count < limit { known[key] = v }
            return v
        }
    }
}
