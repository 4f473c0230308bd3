/// Runs `body`, failing with `onTimeout()` if it takes longer than `seconds`.
public func withTimeout<T: Sendable>(
    _ seconds: Double, onTimeout: @escaping @Sendable () -> Error, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw onTimeout()
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
