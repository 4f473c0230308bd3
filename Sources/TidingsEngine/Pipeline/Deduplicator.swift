import FoundationEssentials
import TidingsPluginAPI

/// Compares a snapshot with stored state and says what happened (DESIGN §1).
///
/// - `new`: a key not present before (or returning after its `removed`);
/// - `changed`: same key, different fingerprint; or a key that returns within `flapWindow`;
/// - `removed`: present before, gone now (after `flapWindow`, if one is set).
///
/// A baseline (the first successful poll) stores everything and emits nothing
/// unless `notifyExisting`. Pure: no I/O, no clock.
package struct Deduplicator: Sendable {
    package var flapWindow: TimeInterval
    /// False for a provider whose snapshot is a window onto a longer list
    /// (``Provider/snapshotIsComplete``): an item that leaves it is stored as gone without a
    /// `removed` event, and one that returns is not `new` again (`changed` if its fingerprint
    /// moved meanwhile). Gone items are pruned after `history_days`, like any.
    package var reportsRemovals: Bool

    package init(flapWindow: TimeInterval = 0, reportsRemovals: Bool = true) {
        self.flapWindow = flapWindow
        self.reportsRemovals = reportsRemovals
    }

    /// What changed about one item (``ItemChange``, in the plugin API: providers describe it).
    package typealias Change = ItemChange

    package struct Outcome: Sendable {
        package var changes: [Change] = []
        /// Rows to write (new, changed, state-transitioned or text-refreshed items). Unchanged items are not rewritten.
        package var upserts: [StoredItem] = []
        /// Items stored silently because this was a baseline.
        package var baselineCount = 0
    }

    /// Gives repeated keys in one snapshot an occurrence suffix (`key`, `key#2`, …): two
    /// identical entries are two items. Which entry gets which name does not depend on the
    /// order they arrive in (servers list such entries in any order): an entry whose
    /// fingerprint a name had in `previous` keeps that name; the others take the free names
    /// in fingerprint order.
    package static func disambiguate(_ items: [Item], previous: [String: StoredItem] = [:]) -> [Item] {
        var positions: [String: [Int]] = [:]
        for (i, item) in items.enumerated() { positions[item.key, default: []].append(i) }
        var out = items
        for (key, group) in positions where group.count > 1 {
            let names = [key] + (2...group.count).map { "\(key)#\($0)" }
            // Entries by fingerprint, each list in content order (identical entries, which are
            // interchangeable, in arrival order): the same set gives the same lists in any order.
            let byFingerprint = Dictionary(grouping: group, by: { items[$0].fingerprint })
                .mapValues { $0.sorted { (items[$0].contentHash, $0) < (items[$1].contentHash, $1) } }
            var taken: [String: Int] = [:]
            var free: [String] = []
            for name in names {
                if let old = previous[name], old.state != .gone, let list = byFingerprint[old.fingerprint] {
                    let n = taken[old.fingerprint, default: 0]
                    if n < list.count {
                        out[list[n]].key = name  // keeps the name it had
                        taken[old.fingerprint] = n + 1
                        continue
                    }
                }
                free.append(name)
            }
            let rest = byFingerprint.sorted { $0.key < $1.key }.flatMap { $0.value.dropFirst(taken[$0.key] ?? 0) }
            for (i, name) in zip(rest, free) { out[i].key = name }
        }
        return out
    }

    package func run(previous: [String: StoredItem], current rawItems: [Item], baseline: Bool, notifyExisting: Bool, now: Date) -> Outcome {
        var seenKeys = Set<String>(minimumCapacity: rawItems.count)
        for item in rawItems { seenKeys.insert(item.key) }
        // Repeated keys are rare: only then copy the snapshot to rename them.
        var current = rawItems
        if seenKeys.count != rawItems.count {
            current = Self.disambiguate(rawItems, previous: previous)
            seenKeys = Set(current.map(\.key))
        }
        var out = Outcome()
        var removals: [Change] = []

        for item in current {
            guard let old = previous[item.key] else {
                out.upserts.append(StoredItem(item: item, state: .present, firstSeen: now, changedAt: now))
                if baseline && !notifyExisting { out.baselineCount += 1 } else { out.changes.append(Change(type: .new, item: item)) }
                continue
            }
            switch old.state {
            case .present:
                if old.fingerprint != item.fingerprint {
                    out.upserts.append(StoredItem(item: item, state: .present, firstSeen: old.firstSeen, changedAt: now))
                    out.changes.append(Change(type: .changed, item: item, previous: old.item))
                } else if old.contentHash != item.contentHash {
                    // A custom fingerprint kept still while the text moved on: store the latest
                    // text (what `tidings items` shows), no event.
                    out.upserts.append(StoredItem(item: item, state: .present, firstSeen: old.firstSeen, changedAt: old.changedAt))
                }
            case .missing:
                // Returned within the flap window: one `changed`, never removed+new.
                out.upserts.append(StoredItem(item: item, state: .present, firstSeen: old.firstSeen, changedAt: now))
                out.changes.append(Change(type: .changed, item: item, previous: old.item, flapped: true))
            case .gone where !reportsRemovals:
                // Back in the window: the same item, not news unless it changed meanwhile.
                if old.fingerprint != item.fingerprint {
                    out.upserts.append(StoredItem(item: item, state: .present, firstSeen: old.firstSeen, changedAt: now))
                    out.changes.append(Change(type: .changed, item: item, previous: old.item))
                } else {
                    out.upserts.append(StoredItem(item: item, state: .present, firstSeen: old.firstSeen, changedAt: now))
                }
            case .gone:
                out.upserts.append(StoredItem(item: item, state: .present, firstSeen: now, changedAt: now))
                if baseline && !notifyExisting { out.baselineCount += 1 } else { out.changes.append(Change(type: .new, item: item)) }
            }
        }

        for (key, old) in previous where !seenKeys.contains(key) {
            switch old.state {
            case .gone:
                continue
            case .present where !reportsRemovals, .missing where !reportsRemovals:
                // Left the window: remembered (as gone, so pruned in time), not removed.
                out.upserts.append(old.with(state: .gone, changedAt: now, missingSince: now))
            case .present where baseline:
                out.upserts.append(old.with(state: .gone, changedAt: now, missingSince: now))
            case .present where flapWindow > 0:
                out.upserts.append(old.with(state: .missing, changedAt: old.changedAt, missingSince: now))
            case .present:
                out.upserts.append(old.with(state: .gone, changedAt: now, missingSince: now))
                removals.append(Change(type: .removed, item: old.item, previous: old.item))
            case .missing:
                let since = old.missingSince ?? now
                if now.timeIntervalSince(since) >= flapWindow {
                    out.upserts.append(old.with(state: .gone, changedAt: now, missingSince: since))
                    removals.append(Change(type: .removed, item: old.item, previous: old.item))
                }
            }
        }
        // Deterministic order: as the provider listed them (the loop above), removals after, by key.
        removals.sort { $0.item.key < $1.item.key }
        out.changes += removals
        return out
    }
}
