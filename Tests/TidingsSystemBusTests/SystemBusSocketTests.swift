import Glibc
import TidingsTestSupport
import XCTest

@testable import TidingsSystemBus

/// Where the watcher looks for the system bus before it loads GIO: no socket there, no GIO
/// (the e2e tests' daemons run with a DBUS_SYSTEM_BUS_ADDRESS that names no socket).
final class SystemBusSocketTests: XCTestCase {
    func testTheAddressGIOWouldConnectTo() {
        XCTAssertEqual(SystemBusWatcher.systemBusSocket(nil), "/var/run/dbus/system_bus_socket")
        XCTAssertEqual(SystemBusWatcher.systemBusSocket("unix:path=/dev/null"), "/dev/null")
        XCTAssertEqual(SystemBusWatcher.systemBusSocket("unix:path=/run/x/bus"), "/run/x/bus")
        // Anything else is GIO's to read.
        XCTAssertNil(SystemBusWatcher.systemBusSocket("unix:abstract=/tmp/dbus-x"))
        XCTAssertNil(SystemBusWatcher.systemBusSocket("unix:path=/run/a%20b"))
        XCTAssertNil(SystemBusWatcher.systemBusSocket("unix:path=/run/x,guid=0123"))
        XCTAssertNil(SystemBusWatcher.systemBusSocket("unix:path=/run/x;tcp:host=127.0.0.1,port=1"))
        XCTAssertNil(SystemBusWatcher.systemBusSocket("tcp:host=127.0.0.1,port=1"))
    }

    func testOnlyASocketCounts() throws {
        let dir = try scratchDirectory()
        XCTAssertEqual(SystemBusWatcher.notASocket(dir + "/missing"), "No such file or directory")
        XCTAssertEqual(SystemBusWatcher.notASocket("/dev/null"), "not a socket")
        XCTAssertEqual(SystemBusWatcher.notASocket(dir), "not a socket")
        // A listening Unix socket, made here.
        let path = dir + "/bus"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0, String(cString: strerror(errno)))
        XCTAssertNil(SystemBusWatcher.notASocket(path))
    }
}
