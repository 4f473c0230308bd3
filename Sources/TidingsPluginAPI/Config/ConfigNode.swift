import Foundation

/// A parsed TOML value that remembers where it was written.
///
/// TOMLKit reports positions only for syntax errors, so ``TOMLLineIndex`` recovers
/// the line of each key from the text; every semantic error can then say `FILE:LINE`.
public struct ConfigNode: Sendable {
    public indirect enum Value: Sendable {
        case string(String)
        case int(Int)
        case double(Double)
        case bool(Bool)
        case array([ConfigNode])
        case table(ConfigTable)
        case other(String)
    }

    public var value: Value
    /// Line of the key that holds this value (1-based), if known.
    public var line: Int?

    public var typeName: String {
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
public struct ConfigTable: Sendable {
    public var file: String
    /// Dotted path of this table (`sources.foo`, `routes[1].match`); empty for the root.
    public var path: String
    public var line: Int?
    public var keys: [String]
    public var entries: [String: ConfigNode]

    public subscript(key: String) -> ConfigNode? { entries[key] }

    package init(file: String, path: String, line: Int? = nil, keys: [String], entries: [String: ConfigNode]) {
        self.file = file
        self.path = path
        self.line = line
        self.keys = keys
        self.entries = entries
    }
}
