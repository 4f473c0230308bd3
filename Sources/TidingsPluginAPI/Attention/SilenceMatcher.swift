import FoundationEssentials

/// One condition of a silence (DESIGN §10, like `amtool silence`): an event field, an
/// operator and a value, written `source=helpdesk`, `severity!=critical`, `title~=disk .* full`.
///
/// `=` and `!=` compare the whole field exactly (case-sensitive); `~=` is a regular expression
/// that matches anywhere in the field (not anchored: write `^…$` for the whole field, `(?i)`
/// to ignore case). Regular expressions run on ``SafeRegex``, in time linear in the text and
/// bounded by its step budget (a pattern too large to search a field's longest value within
/// it is refused): a matcher runs inside each poll's write transaction, and a backtracking
/// engine let one pattern stall every delivery.
package struct SilenceMatcher: Sendable, Equatable, CustomStringConvertible {
    /// The event fields a matcher can test (DESIGN §4's names).
    package enum Field: String, Sendable, CaseIterable {
        case source, provider, kind, event, key, severity, title, body

        func value(of e: Event) -> String {
            switch self {
            case .source: return e.source
            case .provider: return e.provider
            case .kind: return e.kind
            case .event: return e.event.rawValue
            case .key: return e.key
            case .severity: return e.severity.rawValue
            case .title: return e.title
            case .body: return e.body
            }
        }

        /// The longest value (in scalars) that a `~=` pattern must be able to search within
        /// ``SafeRegex/stepBudget``: the bounds items are cut to when a poll takes them in
        /// (key 1 KiB, title 2 KiB, body 64 KiB; names and the fixed lists are short).
        var longestInput: Int {
            switch self {
            case .title: return 2 << 10
            case .body: return SafeRegex.maxInputScalars
            case .source, .provider, .kind, .event, .key, .severity: return 1 << 10
            }
        }

        /// The values an event can have in this field, when there is a fixed list.
        var allowed: [String]? {
            switch self {
            case .severity: return Severity.allCases.map(\.rawValue)
            case .event: return EventType.allCases.map(\.rawValue)
            default: return nil
            }
        }
    }

    package enum Op: String, Sendable, CaseIterable {
        case equal = "="
        case notEqual = "!="
        case regex = "~="
    }

    /// Why a matcher was refused (`silence add` exits 64 with this text).
    package struct ParseError: Error, CustomStringConvertible, Equatable {
        package var description: String
        package init(description: String) { self.description = description }
    }

    package let field: Field
    package let op: Op
    package let value: String
    /// The compiled `value` of a `~=` matcher.
    private let regex: SafeRegex?

    /// Parses `NAME OP VALUE` as typed on the command line (one argument; the value is
    /// everything after the operator and may be empty or contain `=`).
    package init(parsing text: String) throws(ParseError) {
        let name = text.prefix { $0.isLetter }
        let rest = text.dropFirst(name.count)
        guard let op = Op.allCases.sorted(by: { $0.rawValue.count > $1.rawValue.count }).first(where: { rest.hasPrefix($0.rawValue) }) else {
            throw ParseError(description: "matcher '\(text)' is not NAME=VALUE, NAME!=VALUE or NAME~=REGEX (NAME: \(Self.names))")
        }
        try self.init(name: String(name), op: op, value: String(rest.dropFirst(op.rawValue.count)))
    }

    /// A matcher from its parts; checks the name, a fixed field's value and the regex, and
    /// (`checkingCost`) that a regex can search the field's ``Field/longestInput`` within its
    /// step budget. A stored one is read back without that check: refusing it would drop the
    /// silence, and its search is bounded anyway.
    package init(name: String, op: Op, value: String, checkingCost: Bool = true) throws(ParseError) {
        guard let field = Field(rawValue: name) else {
            throw ParseError(description: "unknown matcher name '\(name)': use one of \(Self.names)")
        }
        if op != .regex, let allowed = field.allowed, !allowed.contains(value) {
            throw ParseError(description: "\(name)\(op.rawValue)\(value) can never match: \(name) is one of \(allowed.joined(separator: ", "))")
        }
        self.field = field
        self.op = op
        self.value = value
        if op == .regex {
            do { regex = try SafeRegex(value, longestInput: checkingCost ? field.longestInput : 0) } catch {
                throw ParseError(description: "invalid regular expression in \(name)~=\(value): \(error)")
            }
        } else {
            regex = nil
        }
    }

    private static var names: String { Field.allCases.map(\.rawValue).joined(separator: ", ") }

    package func matches(_ e: Event) -> Bool {
        let v = field.value(of: e)
        switch op {
        case .equal: return v == value
        case .notEqual: return v != value
        case .regex: return regex?.matches(in: v) ?? false
        }
    }

    /// `source=helpdesk`, with the value quoted when it would not read back as one word.
    package var description: String {
        let plain = !value.isEmpty && !value.contains { $0.isWhitespace || $0 == "\"" || $0 == "\\" }
        let shown = plain ? value : "\"" + value.replacingScalars("\\", with: "\\\\").replacingScalars("\"", with: "\\\"") + "\""
        return field.rawValue + op.rawValue + shown
    }

    /// The stored and `--json` form: `{"name": "source", "op": "=", "value": "helpdesk"}`.
    package var json: JSONValue {
        .object(["name": .string(field.rawValue), "op": .string(op.rawValue), "value": .string(value)])
    }

    /// Reads ``json`` back.
    package init(json: JSONValue) throws(ParseError) {
        guard let name = json["name"]?.stringValue, let opText = json["op"]?.stringValue, let op = Op(rawValue: opText),
            case .string(let value)? = json["value"]
        else {
            throw ParseError(description: "unreadable matcher \(json.jsonString())")
        }
        try self.init(name: name, op: op, value: value, checkingCost: false)
    }

    package static func == (a: SilenceMatcher, b: SilenceMatcher) -> Bool {
        a.field == b.field && a.op == b.op && a.value == b.value
    }
}
