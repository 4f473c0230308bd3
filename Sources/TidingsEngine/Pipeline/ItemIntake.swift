import FoundationEssentials
import TidingsPluginAPI

/// Bounds the items a poll takes in, before de-duplication, so that every stored item and
/// every event made from it (a `changed` event nests the old and new `data` a few levels
/// deeper, under `changes`) can be written, read back and sent, and none is huge. Pure.
///
/// What does not fit is cut with a visible marker (`…[what; cut by tidings, digest D]`),
/// never silently, and never at write time. The digest is a hash of what was cut, so a change
/// inside the cut part is still a change of the item.
enum ItemIntake {
    struct Limits: Sendable {
        /// Containers in `data`, counting `data` itself. Far below what the JSON writer and
        /// parser allow (512 for a whole event), leaving room for the event around it.
        var dataDepth = 64
        /// `data` measured as the bytes of its strings and keys, plus 8 per value: about the
        /// length of its JSON text.
        var dataBytes = 64 << 10
        var keyBytes = 1 << 10
        var kindBytes = 256
        var titleBytes = 2 << 10
        var bodyBytes = 64 << 10
        var urlBytes = 8 << 10
    }

    /// The items, bounded, and what was cut from which.
    struct Result: Sendable {
        var items: [Item]
        /// Item key (as bounded) → what was cut, for the poll's warning.
        var cut: [String: [String]] = [:]
    }

    static func take(_ items: [Item], limits: Limits = Limits(), redactor: Redactor = .shared) -> Result {
        var result = Result(items: items)
        for (i, item) in items.enumerated() {
            // Scrubbed before anything is cut, stored or sent: a provider's parser has decoded
            // its text (entities, `\u` escapes), so a secret the raw body held escaped shows now.
            let item = scrubbed(item, redactor) ?? item
            result.items[i] = item
            var notes: [String] = []
            guard let bounded = bounded(item, limits, &notes) else { continue }
            result.items[i] = bounded
            result.cut[bounded.key] = notes
        }
        return result
    }

    /// The item with known secrets scrubbed out of every field that is stored or sent (key,
    /// kind, title, body, url, and `data`'s keys and strings), or nil when it holds none.
    static func scrubbed(_ item: Item, _ redactor: Redactor) -> Item? {
        let key = redactor.scrubbed(item.key), kind = redactor.scrubbed(item.kind)
        let title = redactor.scrubbed(item.title), body = redactor.scrubbed(item.body)
        let url = item.url.flatMap { redactor.scrubbed($0) }, data = redactor.scrubbed(item.data)
        guard key != nil || kind != nil || title != nil || body != nil || url != nil || data != nil else { return nil }
        return Item(
            key: key ?? item.key, kind: kind ?? item.kind, title: title ?? item.title, body: body ?? item.body,
            url: url ?? item.url, severity: item.severity, data: data ?? item.data, expiresAt: item.expiresAt,
            fingerprint: item.hasCustomFingerprint ? item.fingerprint : nil)
    }

    /// The item within `limits`, or nil when it already is (the common case: one walk over
    /// `data`, nothing copied).
    private static func bounded(_ item: Item, _ limits: Limits, _ notes: inout [String]) -> Item? {
        let size = DataSize(item.data)
        let textFits =
            item.key.utf8.count <= limits.keyBytes && item.kind.utf8.count <= limits.kindBytes
            && item.title.utf8.count <= limits.titleBytes && item.body.utf8.count <= limits.bodyBytes
            && (item.url?.utf8.count ?? 0) <= limits.urlBytes
        if textFits && size.depth <= limits.dataDepth && size.bytes <= limits.dataBytes && size.nonFinite == 0 { return nil }

        func text(_ s: String, _ limit: Int, _ name: String) -> String {
            guard s.utf8.count > limit else { return s }
            notes.append("\(name) over \(limit) bytes")
            return cut(s, to: limit)
        }
        var data = item.data
        if size.nonFinite > 0 { notes.append("numbers JSON cannot hold (NaN, infinity) written as strings") }
        if size.depth > limits.dataDepth { notes.append("data nested deeper than \(limits.dataDepth) levels") }
        if size.bytes > limits.dataBytes { notes.append("data over \(limits.dataBytes >> 10) KiB") }
        if size.nonFinite > 0 || size.depth > limits.dataDepth || size.bytes > limits.dataBytes {
            var budget = limits.dataBytes
            data = bound(item.data, depth: 1, limits: limits, budget: &budget)
        }
        // The key is the item's identity: a cut one keeps a digest of the whole, so that two
        // long keys with the same beginning stay two items.
        let key = text(item.key, limits.keyBytes, "key")
        let bounded = Item(
            key: key, kind: text(item.kind, limits.kindBytes, "kind"), title: text(item.title, limits.titleBytes, "title"),
            body: text(item.body, limits.bodyBytes, "body"), url: item.url.map { text($0, limits.urlBytes, "url") },
            severity: item.severity, data: data, expiresAt: item.expiresAt,
            fingerprint: item.hasCustomFingerprint ? item.fingerprint : nil)
        return bounded
    }

    /// `s` cut to about `limit` bytes at a character boundary, with the marker.
    static func cut(_ s: String, to limit: Int) -> String {
        let utf8 = Array(s.utf8)
        var end = min(max(limit, 0), utf8.count)
        while end > 0 && end < utf8.count && utf8[end] & 0xC0 == 0x80 { end -= 1 }  // not inside a character's bytes
        return String(decoding: utf8[..<end], as: UTF8.self) + marker("\(utf8.count) bytes in all", digestOf: s)
    }

    static func marker(_ what: String, digestOf cutPart: String) -> String {
        "…[\(what); cut by tidings, digest \(Fingerprint.of([cutPart]))]"
    }

    /// `value` with containers past the depth limit, non-finite numbers and everything past
    /// the byte budget replaced by markers. Object members are taken in key order, so the
    /// result does not depend on how a dictionary happens to iterate.
    private static func bound(_ value: JSONValue, depth: Int, limits: Limits, budget: inout Int) -> JSONValue {
        switch value {
        case .null, .bool:
            budget -= 8
            return value
        case .number(let n):
            budget -= 8
            return n.isFinite ? value : .string(n.isNaN ? "NaN" : n < 0 ? "-Infinity" : "Infinity")
        case .string(let s):
            defer { budget -= 8 + s.utf8.count }
            return s.utf8.count > budget ? .string(cut(s, to: budget)) : value
        case .array, .object:
            guard depth <= limits.dataDepth else {
                budget -= 8
                return .string(marker("nested deeper than \(limits.dataDepth) levels", digestOf: value.jsonString()))
            }
            budget -= 8
            if case .array(let a) = value {
                var out: [JSONValue] = []
                for (i, v) in a.enumerated() {
                    guard budget > 0 else {
                        out.append(
                            .string(
                                marker(
                                    "\(a.count - i) more elements, over \(limits.dataBytes >> 10) KiB", digestOf: JSONValue.array(Array(a[i...])).jsonString()))
                        )
                        break
                    }
                    out.append(bound(v, depth: depth + 1, limits: limits, budget: &budget))
                }
                return .array(out)
            }
            guard case .object(let o) = value else { return value }
            var out: [String: JSONValue] = [:]
            let keys = o.keys.sorted(by: CompactJSONWriter.keyOrder)
            for (i, k) in keys.enumerated() {
                guard budget > 0 else {
                    let rest = JSONValue.object(Dictionary(uniqueKeysWithValues: keys[i...].map { ($0, o[$0]!) }))
                    out["…"] = .string(marker("\(keys.count - i) more members, over \(limits.dataBytes >> 10) KiB", digestOf: rest.jsonString()))
                    break
                }
                budget -= k.utf8.count
                out[k] = bound(o[k]!, depth: depth + 1, limits: limits, budget: &budget)
            }
            return .object(out)
        }
    }

    /// One walk over a value: how deep, about how big, and whether JSON can hold its numbers.
    struct DataSize {
        var depth = 0
        var bytes = 0
        var nonFinite = 0

        init(_ value: JSONValue) { add(value, depth: 1) }

        private mutating func add(_ value: JSONValue, depth d: Int) {
            bytes += 8
            switch value {
            case .null, .bool: break
            case .number(let n): if !n.isFinite { nonFinite += 1 }
            case .string(let s): bytes += s.utf8.count
            case .array(let a):
                depth = max(depth, d)
                for v in a { add(v, depth: d + 1) }
            case .object(let o):
                depth = max(depth, d)
                for (k, v) in o {
                    bytes += k.utf8.count
                    add(v, depth: d + 1)
                }
            }
        }
    }
}
