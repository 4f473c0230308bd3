/// A configuration problem, located as `FILE:LINE: message` (the format editors jump to).
package struct ConfigError: Error, CustomStringConvertible, Sendable, Equatable {
    package var file: String
    package var line: Int?
    package var message: String

    package init(file: String, line: Int?, _ message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    package var description: String {
        if let line { return "\(file):\(line): \(message)" }
        return "\(file): \(message)"
    }
}

/// Several configuration problems found in one pass (so `config check` shows them all).
package struct ConfigErrors: Error, CustomStringConvertible, Sendable {
    package var errors: [ConfigError]
    /// What the load also found that would only have been warnings (`config check` shows
    /// everything at once).
    package var warnings: [String] = []
    package init(_ errors: [ConfigError], warnings: [String] = []) {
        self.errors = errors
        self.warnings = warnings
    }
    package var description: String { errors.map(\.description).joined(separator: "\n") }
}
