import Foundation
import Logging
import TidingsApp
import TidingsCurl
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsProviders
import TidingsSQLite
import TidingsSinks
import XCTest

/// A scratch directory removed after the test.
package func scratchDirectory() throws -> String {
    let dir = NSTemporaryDirectory() + "tidings-tests-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

package func write(_ text: String, to path: String, mode: Int = 0o600) throws {
    try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    chmod(path, mode_t(mode))
}

/// Without the cache of parsed plugin files (ParsedConfigCacheTests test it in their own folders).
package let testLoader: ConfigLoader = {
    var l = ConfigLoader(providers: BuiltinProviders.registry, sinks: BuiltinSinks.registry, http: testHTTP, mail: testHTTP)
    l.cacheEnvironment = ["TIDINGS_CONFIG_CACHE": "off"]
    return l
}()
/// The one HTTP client of the test process, as a daemon has one.
package let testHTTP = CurlHTTPClient()

/// Loads a main config from text; returns the errors (empty on success).
package func configErrors(_ text: String, plugins: [String: (String, Int)] = [:], mode: Int = 0o600) throws -> [ConfigError] {
    let dir = try scratchDirectory()
    try write(text, to: "\(dir)/tidings.toml", mode: mode)
    try FileManager.default.createDirectory(atPath: "\(dir)/plugins.d", withIntermediateDirectories: true)
    for (name, (content, m)) in plugins { try write(content, to: "\(dir)/plugins.d/\(name)", mode: m) }
    do {
        _ = try testLoader.load(file: "\(dir)/tidings.toml")
        return []
    } catch let e as ConfigErrors {
        return e.errors
    }
}

package func loadConfig(_ text: String, plugins: [String: (String, Int)] = [:], secrets: SecretPolicy = .required) throws -> TidingsConfig {
    let dir = try scratchDirectory()
    try write(text, to: "\(dir)/tidings.toml")
    try FileManager.default.createDirectory(atPath: "\(dir)/plugins.d", withIntermediateDirectories: true)
    for (name, (content, m)) in plugins { try write(content, to: "\(dir)/plugins.d/\(name)", mode: m) }
    var loader = testLoader
    loader.secrets = secrets
    return try loader.load(file: "\(dir)/tidings.toml")
}

/// Deterministic time and randomness: the virtual clock (time moves when a test moves it).
package typealias FixedEnvironment = ManualEnvironment

package let quietLogger: Logger = {
    var l = Logger(label: "test")
    l.logLevel = .critical
    return l
}()

/// Raw SQL for tests, on whichever backend the store has (the seam's `?` placeholders).
extension StateStore {
    package func rows(_ sql: String, _ arguments: any SQLConvertible...) throws -> [SQLRow] {
        try database.read { try $0.fetchAll(sql, arguments.map(\.sqlValue)) }
    }

    package func scalar<T: SQLConvertible>(_ sql: String, _ arguments: any SQLConvertible...) throws -> T? {
        try database.read { try $0.scalar(sql, arguments.map(\.sqlValue)) }
    }

    package func column<T: SQLConvertible>(_ sql: String, _ arguments: any SQLConvertible...) throws -> [T] {
        try database.read { try $0.fetchAll(sql, arguments.map(\.sqlValue)).map { try $0[0] as T } }
    }

    package func exec(_ sql: String, _ arguments: any SQLConvertible...) throws {
        try database.write { try $0.execute(sql, arguments.map(\.sqlValue)) }
    }
}

extension StateStore {
    /// The SQLite database, for the few tests that damage a SQLite file on purpose.
    package var sqlite: SQLiteStateDatabase { database as! SQLiteStateDatabase }
}

/// A fresh state for a state-level test: SQLite in a scratch directory, or with
/// TIDINGS_TEST_BACKEND=postgres a fresh database on the test process's PostgreSQL
/// (TidingsTestSupport's ``TestState``).
package func makeTestStore() throws -> StateStore {
    try TestState.make(directory: try scratchDirectory())
}

/// The same state opened again, as another process would.
package func reopenTestStore(_ store: StateStore) throws -> StateStore {
    store.database.dialect == .sqlite ? try StateStore(path: store.path) : StateStore(database: store.database)
}
