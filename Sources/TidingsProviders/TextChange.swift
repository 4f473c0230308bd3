import FoundationEssentials
import TidingsPluginAPI

/// The `changed` event of a watched text (a `page`, an `exec` source with `format = "text"`):
/// its body is a unified diff of the compared text (`data.text`, else the body), `data.added`
/// and `data.removed` the lines; the whole old and new text are not repeated in `data.changes`.
enum TextChange {
    static func describe(_ event: inout Event, change: ItemChange) {
        guard change.type == .changed, let previous = change.previous else { return }
        func lines(_ item: Item) -> [String] {
            (item.data["text"]?.stringValue ?? item.body).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        }
        let diff = TextDiff.lines(lines(previous), lines(change.item))
        event.body = TextDiff.unified(diff.ops)
        guard case .object(var data) = event.data else { return }
        func list(_ pick: (TextDiff.Op) -> String?) -> JSONValue {
            .array(diff.ops.compactMap(pick).prefix(500).map { .string(FeedText.cut($0, 1000)) })
        }
        data["added"] = list { if case .added(let s) = $0 { return s } else { return nil } }
        data["removed"] = list { if case .removed(let s) = $0 { return s } else { return nil } }
        if case .object(var changes)? = data["changes"] {
            changes["text"] = nil
            changes["body"] = nil
            data["changes"] = .object(changes)
        }
        if !diff.minimal { data["diff_cut"] = true }
        event.data = .object(data)
    }
}
