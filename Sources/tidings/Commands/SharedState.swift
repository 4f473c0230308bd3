import Logging
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsPostgres
import TidingsSQLite

/// Opens the PostgreSQL state of `[state] url` (DESIGN §11).
enum SharedState {
    static func open(_ settings: StateSettings, logger: Logger) throws -> any StateDatabase {
        try PostgresStateDatabase.open(settings, logger: logger)
    }
}
