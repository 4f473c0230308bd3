import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

#if canImport(Glibc)
    import Glibc
#endif

/// A real AF_UNIX datagram socket standing in for the service manager's notify socket.
private final class NotifyListener {
    let fd: Int32
    /// The `NOTIFY_SOCKET` value that reaches it.
    let notifySocket: String

    /// Binds to `path`, or with `abstract` to that abstract-namespace name.
    init(path: String? = nil, abstract: String? = nil) throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno)!) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let name: [UInt8] = path.map { Array($0.utf8) + [0] } ?? ([0] + Array(abstract!.utf8))
        notifySocket = path ?? "@" + abstract!
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: name) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + name.count)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else { throw POSIXError(.init(rawValue: errno)!) }
        // A test that sends nothing fails after 5 s instead of hanging.
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// The next datagram, as text; nil after the receive timeout.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n < 0 ? nil : String(decoding: buffer[..<n], as: UTF8.self)
    }
}

final class SystemdNotifyTests: XCTestCase {
    func testSendsToAFileSystemSocket() throws {
        let dir = try scratchDirectory()
        let listener = try NotifyListener(path: "\(dir)/notify")
        let notifier = try XCTUnwrap(SystemdNotifier(environment: ["NOTIFY_SOCKET": listener.notifySocket]))
        XCTAssertEqual(notifier.address, .path("\(dir)/notify"))

        try notifier.send(.ready, .status("3 sources, 0 failing"))
        XCTAssertEqual(listener.receive(), "READY=1\nSTATUS=3 sources, 0 failing\n")
        try notifier.send(.watchdog)
        XCTAssertEqual(listener.receive(), "WATCHDOG=1\n")
        try notifier.send(.stopping)
        XCTAssertEqual(listener.receive(), "STOPPING=1\n")
    }

    func testSendsToAnAbstractNamespaceSocket() throws {
        let name = "tidings-test-\(UUID().uuidString)"
        let listener = try NotifyListener(abstract: name)
        let notifier = try XCTUnwrap(SystemdNotifier(environment: ["NOTIFY_SOCKET": "@\(name)"]))
        XCTAssertEqual(notifier.address, .abstract(name))

        try notifier.send(.reloading(monotonicMicroseconds: 42))
        XCTAssertEqual(listener.receive(), "RELOADING=1\nMONOTONIC_USEC=42\n")
        try notifier.send(.ready)
        XCTAssertEqual(listener.receive(), "READY=1\n")
    }

    func testReloadingCarriesTheCurrentMonotonicTime() throws {
        let before = SystemdNotifier.monotonicMicroseconds()
        guard case .reloading(let usec) = SystemdNotifyMessage.reloadingNow else { return XCTFail("not RELOADING") }
        let after = SystemdNotifier.monotonicMicroseconds()
        XCTAssert((before...after).contains(usec), "\(usec) not in \(before)...\(after)")
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        XCTAssertEqual(Double(after) / 1e6, Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9, accuracy: 1)
    }

    /// The protocol is newline-separated: a status quoting remote text must not add a line.
    func testStatusIsOneLine() throws {
        let dir = try scratchDirectory()
        let listener = try NotifyListener(path: "\(dir)/notify")
        try SystemdNotifier(address: .path("\(dir)/notify")).send(.status("down: bad\nREADY=1\r\nWATCHDOG=trigger"))
        XCTAssertEqual(listener.receive(), "STATUS=down: bad READY=1 WATCHDOG=trigger\n")
    }

    func testNoNotifierOutsideSystemd() {
        XCTAssertNil(SystemdNotifier(environment: [:]))
        XCTAssertNil(SystemdNotifier(environment: ["NOTIFY_SOCKET": ""]))
    }

    func testAnUnusableAddressFailsEverySendWithItsName() throws {
        let relative = try XCTUnwrap(SystemdNotifier(environment: ["NOTIFY_SOCKET": "run/notify"]))
        XCTAssertEqual(relative.address, .unsupported("run/notify"))
        XCTAssertThrowsError(try relative.send(.ready)) { XCTAssert("\($0)".contains("NOTIFY_SOCKET=run/notify"), "\($0)") }

        let long = SystemdNotifier(address: .path("/" + String(repeating: "x", count: 200)))
        XCTAssertThrowsError(try long.send(.ready)) { XCTAssert("\($0)".contains("longer than"), "\($0)") }
    }

    func testNobodyListeningIsAnErrorNamingTheSocket() throws {
        let dir = try scratchDirectory()
        XCTAssertThrowsError(try SystemdNotifier(address: .path("\(dir)/gone")).send(.ready)) {
            XCTAssert("\($0)".contains("\(dir)/gone"), "\($0)")
        }
        XCTAssertThrowsError(try SystemdNotifier(address: .abstract("tidings-nobody-\(UUID().uuidString)")).send(.ready)) {
            XCTAssert("\($0)".contains("@tidings-nobody-"), "\($0)")
        }
    }

    func testWatchdogIntervalIsHalfOfWatchdogUsecForThisProcess() {
        XCTAssertEqual(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "30000000"], pid: 7), .seconds(15))
        XCTAssertEqual(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "7"], pid: 7), .seconds(15))
        XCTAssertNil(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "8"], pid: 7))
        XCTAssertNil(SystemdNotifier.watchdogInterval(environment: [:], pid: 7))
        XCTAssertNil(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "0"], pid: 7))
        XCTAssertNil(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "-5"], pid: 7))
        XCTAssertNil(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "30s"], pid: 7))
    }
}
