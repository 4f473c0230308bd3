import FoundationEssentials
import TidingsEngine

/// Starts `n` grouped writes at once (``StateDatabase/performGrouped(order:_:)``), write `i`
/// ordered by `order(i)`: each one's result, by index, once all are done.
package func startGroupedWrites<T: Sendable>(
    _ db: any StateDatabase, count n: Int, order: @escaping @Sendable (Int) -> String = { String($0) },
    _ body: @escaping @Sendable (Int, any SQLConnection) throws -> T
) -> Task<[Result<T, any Error>], Never> {
    Task {
        await withTaskGroup(of: (Int, Result<T, any Error>).self) { group in
            for i in 0..<n {
                group.addTask {
                    do {
                        return (i, .success(try await db.performGrouped(order: order(i)) { try body(i, $0) }))
                    } catch {
                        return (i, .failure(error))
                    }
                }
            }
            var out = [Result<T, any Error>?](repeating: nil, count: n)
            for await (i, r) in group { out[i] = r }
            return out.map { $0! }
        }
    }
}

extension Result {
    /// A failure that `matching` accepts.
    package func isFailure(_ matching: (Failure) -> Bool) -> Bool {
        if case .failure(let e) = self { return matching(e) }
        return false
    }
}
