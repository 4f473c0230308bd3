import Logging
import TidingsCore

/// Opens the PostgreSQL state of `[state] url` (DESIGN §11).
enum SharedState {
    static func open(_ settings: StateSettings, logger: Logger) throws -> any StateDatabase {
        throw ConfigError(file: settings.origin, line: nil, "PostgreSQL state is not built into this tidings")
    }
}
