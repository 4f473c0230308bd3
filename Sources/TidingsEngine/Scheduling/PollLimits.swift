import Logging
import Synchronization
import TidingsPluginAPI

/// `max_concurrent` and `max_per_host`: how many polls run at once, in all and against one
/// host. The daemon's scheduler and `tidings check` both poll through one of these.
package final class PollLimits: Sendable {
    private let global: AsyncSemaphore
    private let perHostLimit: Int
    private let perHost = Mutex<[String: AsyncSemaphore]>([:])

    package init(maxConcurrent: Int, maxPerHost: Int) {
        global = AsyncSemaphore(maxConcurrent)
        perHostLimit = maxPerHost
    }

    package convenience init(_ config: TidingsConfig) {
        self.init(maxConcurrent: config.maxConcurrent, maxPerHost: config.maxPerHost)
    }

    /// Takes one of the `max_concurrent` slots if one is free now (the scheduler leaves a due
    /// poll in its queue, in due order, while none is): pass `holding: true` to ``withSlot``.
    package func tryTakeSlot() -> Bool { global.tryWait() }

    /// Runs `body` once both limits allow a poll of `source`. `holding`: the caller took the
    /// `max_concurrent` slot already (``tryTakeSlot()``); it is given back when `body` returns.
    package func withSlot<T>(
        for source: SourceConfig, holding: Bool = false, isolation: isolated (any Actor)? = #isolation,
        _ body: () async -> T
    ) async -> T {
        let host = source.instance.host.map(limiter)
        if !holding { await global.wait() }
        await host?.wait()
        defer {
            host?.signal()
            global.signal()
        }
        return await body()
    }

    /// Polls every source within the limits, concurrently; the outcomes in the given order.
    /// `known`: their state rows, read at once (``SourceStates``).
    package func pollAll(
        _ sources: [SourceConfig], runner: PollRunner, options: RecordOptions, logger: Logger, known: SourceStates? = nil
    ) async -> [PollOutcome] {
        await withTaskGroup(of: (Int, PollOutcome).self) { group in
            for (i, s) in sources.enumerated() {
                group.addTask {
                    await self.withSlot(for: s) { (i, await runner.poll(s, options: options, logger: logger, known: known)) }
                }
            }
            var out: [(Int, PollOutcome)] = []
            for await r in group { out.append(r) }
            return out.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    private func limiter(_ host: String) -> AsyncSemaphore {
        perHost.withLock { limiters in
            if let l = limiters[host] { return l }
            let l = AsyncSemaphore(perHostLimit)
            limiters[host] = l
            return l
        }
    }
}
