import Foundation
import Logging
import TidingsEngine
import TidingsPluginAPI
import TidingsPostgres
import TidingsSQLite

/// The state a test works on: the SQLite store in its scratch directory, or, when the
/// environment says `TIDINGS_TEST_BACKEND=postgres`, a fresh database on the process's
/// ``PostgresTestServer``. The state-level suites run against both this way.
package enum TestState {
    package enum Backend: String, Sendable { case sqlite, postgres }

    package static var backend: Backend {
        ProcessInfo.processInfo.environment["TIDINGS_TEST_BACKEND"].flatMap(Backend.init(rawValue:)) ?? .sqlite
    }

    package static var logger: Logger {
        var l = Logger(label: "tidings-test-state")
        l.logLevel = .critical
        return l
    }

    /// The backend's database: `directory`'s SQLite file, or a fresh PostgreSQL database.
    package static func makeDatabase(directory: String, backend: Backend = TestState.backend) throws -> any StateDatabase {
        switch backend {
        case .sqlite:
            return try StateStore.open(directory: directory, logger: logger).database
        case .postgres:
            return try PostgresStateDatabase.open(try PostgresTestServer.freshDatabase(), logger: logger)
        }
    }

    /// The store on the backend's database (see ``makeDatabase(directory:backend:)``).
    package static func make(directory: String, backend: Backend = TestState.backend) throws -> StateStore {
        switch backend {
        case .sqlite: return try StateStore.open(directory: directory, logger: logger)
        case .postgres: return StateStore(database: try makeDatabase(directory: directory, backend: .postgres))
        }
    }
}
