import Logging
import TidingsPostgres
import TidingsPluginAPI
import TidingsEngine
import TidingsSQLite
import TidingsPOSIX
import TidingsApp

/// Opens the PostgreSQL state of `[state] url` (DESIGN §11).
enum SharedState {
    static func open(_ settings: StateSettings, logger: Logger) throws -> any StateDatabase {
        try PostgresStateDatabase.open(settings, logger: logger)
    }
}
