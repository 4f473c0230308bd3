import TidingsPOSIX
import TidingsPluginAPI

/// RFC 6901 JSON pointers (`/items/0/name`) and `{pointer}` templates (`"{/name} is {/status}"`).
package enum JSONPointer {
    /// Resolves `pointer` in `value`; `""` is the whole value.
    package static func resolve(_ pointer: String, in value: JSONValue) -> JSONValue? {
        if pointer.isEmpty { return value }
        guard pointer.hasPrefix("/") else { return nil }
        var current = value
        for raw in pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            let token = raw.replacingScalars("~1", with: "/").replacingScalars("~0", with: "~")
            switch current {
            case .object(let o):
                guard let next = o[token] else { return nil }
                current = next
            case .array(let a):
                guard let i = Int(token), a.indices.contains(i) else { return nil }
                current = a[i]
            default:
                return nil
            }
        }
        return current
    }

    package static func isValid(_ pointer: String) -> Bool { pointer.isEmpty || pointer.hasPrefix("/") }
}

/// A field spec from config: a JSON pointer (`/title`) or a template with `{pointer}` parts.
package struct FieldTemplate: Sendable {
    enum Part: Sendable {
        case literal(String)
        case pointer(String)
    }
    let parts: [Part]

    /// Templates parsed before, by spec: 100,000 sources of one shape share theirs (their parts
    /// were ≈ 240 bytes a source, issue 33).
    private static let known = SharedValues<String, FieldTemplate?>()

    /// `FieldTemplate(spec)`, shared with every source that gave the same spec.
    package static func shared(_ spec: String) -> FieldTemplate? { known.value(spec) { FieldTemplate($0) } }

    /// Parses `spec`; returns nil if it is neither a pointer nor a template.
    package init?(_ spec: String) {
        if spec.hasPrefix("/") && !spec.contains("{") {
            parts = [.pointer(spec)]
            return
        }
        var parts: [Part] = []
        var literal = ""
        var i = spec.startIndex
        while i < spec.endIndex {
            if spec[i] == "{", let close = spec[i...].firstIndex(of: "}") {
                let inner = String(spec[spec.index(after: i)..<close])
                guard JSONPointer.isValid(inner) else { return nil }
                if !literal.isEmpty {
                    parts.append(.literal(literal))
                    literal = ""
                }
                parts.append(.pointer(inner))
                i = spec.index(after: close)
            } else {
                literal.append(spec[i])
                i = spec.index(after: i)
            }
        }
        if !literal.isEmpty { parts.append(.literal(literal)) }
        guard
            parts.contains(where: {
                if case .pointer = $0 { return true }
                return false
            })
        else { return nil }
        self.parts = parts
    }

    /// The rendered text; missing pointers render as empty. Nil if every pointer was missing.
    package func render(_ value: JSONValue) -> String? {
        var out = ""
        var found = false
        for p in parts {
            switch p {
            case .literal(let s): out += s
            case .pointer(let ptr):
                if let v = JSONPointer.resolve(ptr, in: value), !v.isNull {
                    found = true
                    out += v.stringValue ?? v.jsonString()
                }
            }
        }
        return found ? out : nil
    }
}
