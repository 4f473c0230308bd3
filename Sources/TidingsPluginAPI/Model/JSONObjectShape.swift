/// A JSON object whose members are listed in exactly one place.
///
/// `Member` names the keys, declared in key order (by UTF-8 bytes, the order the writer
/// sorts by; `JSONShapeTests` checks it); ``value(of:)`` gives each member's value. The
/// compact text (``jsonText(capacity:)``), the ``JSONValue`` form (``jsonValue``) and the
/// readers (``JSONMembers``) all go by them, so the shape cannot drift between writer and
/// reader, or between the stored form and what `--json` prints.
package protocol JSONObjectShape {
    associatedtype Member: RawRepresentable<String>, CaseIterable
    /// The member's value; nil leaves the member out (JSON `null` is ``JSONValue/null``).
    func value(of member: Member) -> JSONValue?
}

extension JSONObjectShape {
    /// Compact JSON text, keys sorted: the bytes `JSONEncoder` with
    /// `[.sortedKeys, .withoutEscapingSlashes]` would write for ``jsonValue``. Never fails.
    package func jsonText(capacity: Int = 256) -> String {
        var w = CompactJSONWriter(capacity: capacity)
        w.append(byte: UInt8(ascii: "{"))
        var first = true
        for member in Member.allCases {
            guard let v = value(of: member) else { continue }
            w.write(key: member.rawValue, first: first)
            first = false
            w.write(v, depth: 1)
        }
        w.append(byte: UInt8(ascii: "}"))
        return w.string
    }

    /// The same object as a ``JSONValue`` (to embed it in another one).
    package var jsonValue: JSONValue {
        var o: [String: JSONValue] = [:]
        for member in Member.allCases {
            if let v = value(of: member) { o[member.rawValue] = v }
        }
        return .object(o)
    }
}

/// Reads the members of a ``JSONObjectShape`` back from parsed JSON, naming what is wrong.
package struct JSONMembers<Member: RawRepresentable<String>> {
    let object: [String: JSONValue]
    /// What the object is, for messages ("event").
    let what: String

    /// Parses `text`, which must hold one JSON object.
    package init(parsing text: String, what: String) throws(JSONParseError) {
        guard case .object(let o) = try JSONParser.parse(text) else { throw JSONParseError(message: "\(what): not a JSON object") }
        object = o
        self.what = what
    }

    package subscript(_ member: Member) -> JSONValue? { object[member.rawValue] }

    /// A string member; absent or `null` gives nil.
    func optionalString(_ member: Member) throws(JSONParseError) -> String? {
        switch self[member] {
        case .string(let s)?: return s
        case nil, .null?: return nil
        default: throw JSONParseError(message: "\(what): '\(member.rawValue)' is not a string")
        }
    }

    /// A string member that must be there.
    package func string(_ member: Member) throws(JSONParseError) -> String {
        guard let s = try optionalString(member) else { throw JSONParseError(message: "\(what): missing '\(member.rawValue)'") }
        return s
    }
}
