import FoundationEssentials

/// What one poll found changed about one item: the engine's deduplicator makes these, and a
/// provider's ``Provider/describe(_:change:firstSeen:)`` may word the event for one.
package struct ItemChange: Sendable, Equatable {
    package var type: EventType
    package var item: Item
    /// The item before (for `changed` and `removed`).
    package var previous: Item?
    /// The item returned within the flap window.
    package var flapped: Bool = false

    package init(type: EventType, item: Item, previous: Item? = nil, flapped: Bool = false) {
        self.type = type
        self.item = item
        self.previous = previous
        self.flapped = flapped
    }
}
