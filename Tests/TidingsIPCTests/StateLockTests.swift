import Foundation
import Glibc
import TidingsTestSupport
import XCTest

@testable import TidingsIPC

/// The state lock (DESIGN §7) on real files: flock locks belong to an open file description, so a
/// second open in this process stands for a second process.
final class StateLockTests: XCTestCase {
    func testADaemonOwnsTheStateAndAnotherFindsItsPID() throws {
        let dir = try scratchDirectory() + "/state"
        guard case .owned(let lock) = try StateLock.claim(directory: dir) else { return XCTFail("not owned") }
        let text = try XCTUnwrap(FileManager.default.contents(atPath: StateLock.path(in: dir)))
        XCTAssertEqual(String(decoding: text, as: UTF8.self), "\(getpid())\n")
        guard case .heldByDaemon(let pid) = try StateLock.claim(directory: dir) else { return XCTFail("claimed twice") }
        XCTAssertEqual(pid, getpid())
        guard case .heldByDaemon(let checked) = try StateLock.share(directory: dir) else { return XCTFail("shared beside a daemon") }
        XCTAssertEqual(checked, getpid())
        guard case .heldByDaemon(let probed, let since) = try StateLock.probe(directory: dir) else { return XCTFail("probe") }
        XCTAssertEqual(probed, getpid())
        XCTAssertNotNil(since)
        withExtendedLifetime(lock) {}
    }

    func testChecksShareAndKeepADaemonOut() throws {
        let dir = try scratchDirectory() + "/state"
        XCTAssertEqual(try StateLock.probe(directory: dir), .noLockFile)
        guard case .shared(let first) = try StateLock.share(directory: dir) else { return XCTFail("not shared") }
        guard case .shared(let second) = try StateLock.share(directory: dir) else { return XCTFail("checks exclude each other") }
        guard case .heldByChecks = try StateLock.claim(directory: dir) else { return XCTFail("a daemon beside checks") }
        XCTAssertEqual(try StateLock.probe(directory: dir), .free)
        withExtendedLifetime((first, second)) {}
    }

    func testTheLockGoesWithItsHolder() throws {
        let dir = try scratchDirectory() + "/state"
        do {
            guard case .owned = try StateLock.claim(directory: dir) else { return XCTFail("not owned") }
        }
        XCTAssertEqual(try StateLock.probe(directory: dir), .free)
        guard case .owned = try StateLock.claim(directory: dir) else { return XCTFail("a released lock stayed held") }
    }

    func testTheStateDirectoryIsMadePrivate() throws {
        let dir = try scratchDirectory() + "/a/state"
        guard case .owned(let lock) = try StateLock.claim(directory: dir) else { return XCTFail("not owned") }
        var st = stat()
        XCTAssertEqual(stat(dir, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o700)
        XCTAssertEqual(stat(lock.path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
    }

    func testASymlinkInPlaceOfTheLockFileIsRefused() throws {
        let dir = try scratchDirectory()
        let target = dir + "/elsewhere"
        XCTAssertTrue(FileManager.default.createFile(atPath: target, contents: Data("keep\n".utf8)))
        XCTAssertEqual(symlink(target, StateLock.path(in: dir)), 0)
        XCTAssertThrowsError(try StateLock.claim(directory: dir)) { error in
            XCTAssertEqual((error as? SystemFailure)?.code, ELOOP, "\(error)")
        }
        XCTAssertEqual(FileManager.default.contents(atPath: target), Data("keep\n".utf8))
    }
}

/// The control socket's transport on a real socket file.
final class UnixSocketTests: XCTestCase {
    func testALineEachWayAndThePeersCredentials() throws {
        let path = try scratchDirectory() + "/t.sock"
        let listener = try UnixSocket.listen(path: path, backlog: 4)
        defer { listener.close() }
        let client = try XCTUnwrap(try UnixSocket.connect(path: path))
        defer { client.close() }
        let server = try XCTUnwrap(try listener.accept(timeout: 5))
        defer { server.close() }
        XCTAssertEqual(server.peer(), UnixSocket.Peer(pid: getpid(), uid: geteuid(), gid: getegid()))
        XCTAssertEqual(client.peer()?.isSameUserOrRoot, true)
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        try client.write(line: "ping", stall: 5)
        XCTAssertEqual(try server.readLine(maxBytes: 100, idle: 5, deadline: deadline), "ping")
        try server.write(line: "pong", stall: 5)
        XCTAssertEqual(try client.readLine(maxBytes: 100, idle: 5, deadline: deadline), "pong")
        server.close()
        XCTAssertNil(try client.readLine(maxBytes: 100, idle: 5, deadline: deadline))
    }

    func testNobodyListeningIsNilNotAnError() throws {
        let path = try scratchDirectory() + "/none.sock"
        XCTAssertNil(try UnixSocket.connect(path: path))
    }
}
