import Foundation
import Synchronization
import TidingsTestSupport

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// A state database that records every statement run through it, then runs it on `base`.
final class StatementLog: StateDatabase {
    let base: any StateDatabase
    private let statements = Mutex<[String]>([])

    init(_ base: any StateDatabase) { self.base = base }

    /// The statements run so far that name `table`, and forgets them all.
    func take(touching table: String) -> [String] {
        statements.withLock { all in
            defer { all = [] }
            return all.filter { $0.range(of: "\\b\(table)\\b", options: .regularExpression) != nil }
        }
    }

    fileprivate func note(_ sql: String) { statements.withLock { $0.append(sql) } }

    var location: String { base.location }
    var dialect: SQLDialect { base.dialect }
    var isShared: Bool { base.isShared }
    func transaction<T>(_ kind: TransactionKind, _ body: (any SQLConnection) throws -> T) throws -> T {
        try base.transaction(kind) { try body(Counted(base: $0, log: self)) }
    }
    func perform<T: Sendable>(_ kind: TransactionKind, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await base.perform(kind) { [self] in try body(Counted(base: $0, log: self)) }
    }
    func close() async { await base.close() }

    private struct Counted: SQLConnection {
        let base: any SQLConnection
        let log: StatementLog
        var dialect: SQLDialect { base.dialect }
        func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
            log.note(sql)
            return try base.execute(sql, arguments)
        }
        func fetchAll(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
            log.note(sql)
            return try base.fetchAll(sql, arguments)
        }
        func executeMany(_ sql: String, _ rows: [[SQLValue]]) throws {
            log.note(sql)
            try base.executeMany(sql, rows)
        }
    }
}
