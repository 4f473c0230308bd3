import Foundation

/// What one poll found changed about one item: the engine's deduplicator makes these, and a
/// provider's ``Provider/describe(_:change:firstSeen:)`` may word the event for one.
public struct ItemChange: Sendable, Equatable {
    public var type: EventType
    public var item: Item
    /// The item before (for `changed` and `removed`).
    public var previous: Item?
    /// The item returned within the flap window.
    public var flapped: Bool = false

    public init(type: EventType, item: Item, previous: Item? = nil, flapped: Bool = false) {
        self.type = type
        self.item = item
        self.previous = previous
        self.flapped = flapped
    }
}
