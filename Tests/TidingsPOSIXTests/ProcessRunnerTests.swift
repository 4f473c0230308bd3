import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class ProcessRunnerTests: XCTestCase {
    private func sh(
        _ script: String, stdin: Data? = nil, directory: String? = nil, timeout: TimeInterval = 10,
        maxOutput: Int = 1 << 20, exitWatch: ProcessRunner.ExitWatch = .pidfd
    ) async throws -> ProcessRunner.Output {
        try await ProcessRunner.run(
            ["/bin/sh", "-c", script], directory: directory, environment: nil, stdin: stdin,
            timeout: timeout, maxOutput: maxOutput, exitWatch: exitWatch)
    }

    private func text(_ d: Data) -> String { String(decoding: d, as: UTF8.self) }

    /// The daemon blocks signals for its own handling and ignores SIGPIPE; a child must start
    /// with neither (a plugin could not time itself out, `timeout 1 sleep 4` took 4 s).
    func testChildStartsWithAnEmptySignalMaskAndDefaultDispositions() async throws {
        var blocked = sigset_t()
        var previous = sigset_t()
        sigemptyset(&blocked)
        for s in [SIGTERM, SIGINT, SIGHUP, SIGALRM, SIGCHLD, SIGUSR1] { sigaddset(&blocked, s) }
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        let out = try await sh("exec grep -E '^Sig(Blk|Ign)' /proc/self/status")
        XCTAssertEqual(out.termination, .exited(0))
        XCTAssertEqual(text(out.stdout), "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n")
    }

    func testOnlyStdioIsInherited() async throws {
        let leaked = open("/dev/null", O_RDONLY)  // no O_CLOEXEC, as careless code would open it
        defer { close(leaked) }
        XCTAssertGreaterThan(leaked, 2)
        let out = try await sh("ls /proc/$$/fd")
        XCTAssertEqual(text(out.stdout).split(separator: "\n"), ["0", "1", "2"])
    }

    func testLeadsItsOwnSessionInTheWorkingDirectory() async throws {
        let out = try await sh("pwd; ps -o sid= -p $$; echo $$", directory: "/usr")
        let lines = text(out.stdout).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        XCTAssertEqual(lines.count, 3)
        XCTAssertEqual(lines[0], "/usr")
        XCTAssertEqual(lines[1], lines[2], "session id is the child's pid")
    }

    func testMissingWorkingDirectoryIsALaunchError() async {
        do {
            _ = try await sh("true", directory: "/nonexistent-\(UUID().uuidString)")
            XCTFail("expected a launch error")
        } catch let e as ProcessRunner.LaunchError {
            XCTAssertTrue(e.description.contains("working directory"), e.description)
        } catch { XCTFail("\(error)") }
    }

    /// SIGTERM is ignored by the script and by a grandchild: SIGKILL takes the whole group,
    /// and the child is reaped before `run` returns.
    func testTimeoutKillsTheWholeProcessGroup() async throws {
        let out = try await sh("trap '' TERM; sh -c 'trap \"\" TERM; sleep 30' & echo $!; sleep 30", timeout: 0.3)
        XCTAssertEqual(out.termination, .timedOut)
        let grandchild = try XCTUnwrap(Int32(text(out.stdout).trimmingCharacters(in: .whitespacesAndNewlines)))
        // SIGKILL went to the group before `run` returned; the kernel finishes it a moment later
        // (under load, after this line runs): wait for that, boundedly.
        let killed = await gone(grandchild, within: 5)
        XCTAssertTrue(killed, "the background process of a timed-out child must be killed")
    }

    /// A child that exits but leaves a background process holding stdout is done when it
    /// exits, not when its deadline passes.
    func testBackgroundProcessHoldingStdoutIsNotATimeout() async throws {
        for watch in [ProcessRunner.ExitWatch.pidfd, .polling] {
            let out = try await sh("echo started; sleep 30 & echo $!; exit 0", timeout: 5, exitWatch: watch)
            XCTAssertEqual(out.termination, .exited(0), "\(watch)")
            let lines = text(out.stdout).split(separator: "\n")
            XCTAssertEqual(lines.first, "started")
            if let pid = lines.last.flatMap({ Int32($0) }) { kill(pid, SIGKILL) }
        }
    }

    func testCancellationKillsTheChild() async throws {
        let task = Task {
            try await ProcessRunner.run(
                ["/bin/sleep", "30"], directory: nil, environment: nil, stdin: nil,
                timeout: 60, maxOutput: 1 << 20, exitWatch: .pidfd)
        }
        try await Task.sleep(for: .milliseconds(200))
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("expected cancellation")
        } catch is CancellationError {}
    }

    func testStdinLargerThanAPipeBufferAndExitStatus() async throws {
        let out = try await sh("wc -c; exit 3", stdin: Data(repeating: 65, count: 1 << 20))
        XCTAssertEqual(out.termination, .exited(3))
        XCTAssertEqual(text(out.stdout).trimmingCharacters(in: .whitespacesAndNewlines), "1048576")
    }

    func testChildThatDoesNotReadStdin() async throws {
        let out = try await sh("exit 0", stdin: Data(repeating: 65, count: 1 << 20))
        XCTAssertEqual(out.termination, .exited(0))
    }

    func testOutputIsBounded() async throws {
        let out = try await sh("head -c 1000000 /dev/zero; echo done >&2", maxOutput: 1000)
        XCTAssertEqual(out.termination, .exited(0))
        XCTAssertEqual(out.stdout.count, 1000)
        XCTAssertTrue(out.truncated)
        XCTAssertEqual(text(out.stderr), "done\n")
    }

    func testKilledBySignal() async throws {
        let out = try await sh("kill -KILL $$")
        XCTAssertEqual(out.termination, .signaled(SIGKILL))
    }

    func testPollingExitWatchSeesAQuickExit() async throws {
        let out = try await sh("echo hi", exitWatch: .polling)
        XCTAssertEqual(out.termination, .exited(0))
        XCTAssertEqual(text(out.stdout), "hi\n")
    }

    /// Alive and not a zombie (killed processes wait for PID 1 to reap them).
    /// Whether `pid` stops running within `seconds`.
    private func gone(_ pid: Int32, within seconds: Double) async -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while isRunning(pid) {
            guard Date() < end else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    private func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        let state = stat[stat.index(close, offsetBy: 2)]
        return state != "Z" && state != "X"
    }
}
