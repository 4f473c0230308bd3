/// A configuration problem, located as `FILE:LINE: message` (the format editors jump to).
public struct ConfigError: Error, CustomStringConvertible, Sendable, Equatable {
    public var file: String
    public var line: Int?
    public var message: String

    public init(file: String, line: Int?, _ message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String {
        if let line { return "\(file):\(line): \(message)" }
        return "\(file): \(message)"
    }
}

/// Several configuration problems found in one pass (so `config check` shows them all).
public struct ConfigErrors: Error, CustomStringConvertible, Sendable {
    public var errors: [ConfigError]
    /// What the load also found that would only have been warnings (`config check` shows
    /// everything at once).
    public var warnings: [String] = []
    public init(_ errors: [ConfigError], warnings: [String] = []) {
        self.errors = errors
        self.warnings = warnings
    }
    public var description: String { errors.map(\.description).joined(separator: "\n") }
}
