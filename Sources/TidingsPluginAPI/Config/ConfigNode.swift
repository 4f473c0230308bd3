import FoundationEssentials

/// A parsed TOML value that remembers where it was written.
///
/// TOMLKit reports positions only for syntax errors, so ``TOMLLineIndex`` recovers
/// the line of each key from the text; every semantic error can then say `FILE:LINE`.
package struct ConfigNode: Sendable {
    package indirect enum Value: Sendable {
        case string(String)
        case int(Int)
        case double(Double)
        case bool(Bool)
        case array([ConfigNode])
        case table(ConfigTable)
        case other(String)
    }

    package var value: Value
    /// Line of the key that holds this value (1-based), if known.
    package var line: Int?

    package var typeName: String {
        switch value {
        case .string: return "a string"
        case .int: return "an integer"
        case .double: return "a number"
        case .bool: return "a boolean"
        case .array: return "an array"
        case .table: return "a table"
        case .other(let t): return t
        }
    }

    package init(value: Value, line: Int? = nil) {
        self.value = value
        self.line = line
    }
}

/// A TOML table with ordered keys and per-key lines.
package struct ConfigTable: Sendable {
    package var file: String
    /// Dotted path of this table (`sources.foo`, `routes[1].match`); empty for the root.
    package var path: String
    package var line: Int?
    package var keys: [String]
    package var entries: [String: ConfigNode]

    package subscript(key: String) -> ConfigNode? { entries[key] }

    package init(file: String, path: String, line: Int? = nil, keys: [String], entries: [String: ConfigNode]) {
        self.file = file
        self.path = path
        self.line = line
        self.keys = keys
        self.entries = entries
    }
}
