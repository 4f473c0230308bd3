import Foundation

/// Runs a child process with a deadline and bounded output (exec providers and sinks).
///
/// Pipes are drained on GCD threads, never on the async pool. Foundation's `Process` starts
/// the child as leader of its own process group, so on timeout the whole group (a shell
/// script's children included) gets SIGTERM, then SIGKILL after two seconds.
public enum ProcessRunner {
    public struct Output: Sendable {
        public var status: Int32
        public var stdout: Data
        public var stderr: Data
        public var timedOut: Bool
        /// stdout was cut at `maxOutput`.
        public var truncated: Bool
        /// Killed by a signal rather than exiting.
        public var signaled: Bool
    }

    public struct LaunchError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public static func run(
        _ command: [String], directory: String? = nil, environment: [String: String]? = nil, stdin: Data? = nil,
        timeout: TimeInterval, maxOutput: Int = 10 << 20
    ) async throws -> Output {
        guard let exe = command.first else { throw LaunchError(description: "empty command") }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: resolve(exe, directory: directory, environment: environment))
        p.arguments = Array(command.dropFirst())
        if let directory { p.currentDirectoryURL = URL(fileURLWithPath: directory) }
        if let environment { p.environment = environment }
        let out = Pipe(), err = Pipe(), inp = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = inp

        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<Output, Error>) in
            let group = DispatchGroup()
            let box = OutputBox()
            group.enter()
            DispatchQueue.global().async {
                box.stdout = readBounded(out.fileHandleForReading, limit: maxOutput, truncated: &box.truncated)
                group.leave()
            }
            group.enter()
            DispatchQueue.global().async {
                var t = false
                box.stderr = readBounded(err.fileHandleForReading, limit: 64 << 10, truncated: &t)
                group.leave()
            }
            p.terminationHandler = { _ in group.leave() }
            group.enter()
            do {
                try p.run()
            } catch {
                group.leave()
                try? out.fileHandleForWriting.close()
                try? err.fileHandleForWriting.close()
                c.resume(throwing: LaunchError(description: "cannot run \(exe): \(error.localizedDescription)"))
                return
            }
            DispatchQueue.global().async {
                if let stdin { try? inp.fileHandleForWriting.write(contentsOf: stdin) }
                try? inp.fileHandleForWriting.close()
            }
            let pid = p.processIdentifier
            let deadline = DispatchWorkItem {
                box.timedOut = true
                kill(-pid, SIGTERM)
                kill(pid, SIGTERM)
                DispatchQueue.global().asyncAfter(deadline: .now() + 2) {
                    kill(-pid, SIGKILL)
                    if p.isRunning { kill(pid, SIGKILL) }
                }
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: deadline)
            group.notify(queue: .global()) {
                deadline.cancel()
                c.resume(returning: Output(
                    status: p.terminationStatus, stdout: box.stdout, stderr: box.stderr, timedOut: box.timedOut,
                    truncated: box.truncated, signaled: p.terminationReason == .uncaughtSignal))
            }
        }
    }

    /// `./x` and `x/y` resolve against `directory`; a bare name is looked up in `PATH`.
    static func resolve(_ exe: String, directory: String?, environment: [String: String]?) -> String {
        if exe.hasPrefix("/") { return exe }
        if exe.contains("/") { return ((directory ?? FileManager.default.currentDirectoryPath) as NSString).appendingPathComponent(exe) }
        let path = (environment ?? ProcessInfo.processInfo.environment)["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for dir in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(dir)/\(exe)") {
            return "\(dir)/\(exe)"
        }
        return exe
    }

    private static func readBounded(_ h: FileHandle, limit: Int, truncated: inout Bool) -> Data {
        var data = Data()
        while true {
            let chunk = h.availableData
            if chunk.isEmpty { break }
            if data.count < limit {
                data.append(chunk.prefix(limit - data.count))
                if data.count >= limit && chunk.count > 0 { truncated = true }
            } else {
                truncated = true  // keep draining so the child never blocks on a full pipe
            }
        }
        return data
    }

    private final class OutputBox: @unchecked Sendable {
        var stdout = Data()
        var stderr = Data()
        var timedOut = false
        var truncated = false
    }
}
