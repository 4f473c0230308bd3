import Foundation
import Synchronization
import XCTest

@testable import TidingsPluginAPI

/// The stdlib and Glibc helpers that replace corelibs Foundation calls (issue 31 item 2), checked
/// against the Foundation calls they replace: same answers on the same inputs.
final class EssentialsHelpersTests: XCTestCase {
    let samples = [
        "", " ", "\t\n", "x", "  x  ", "\n4242\n", "\t a b \t", " \u{00A0}x\u{3000} ", "\u{2028}x\u{2029}",
        "\u{85}x\u{0B}\u{0C}\r", " \u{301}x", "x\u{200B}", "é ", "\u{FEFF}x", "\u{1680}\u{2000}\u{200A}x\u{202F}\u{205F}",
    ]

    func testTrimmedMatchesFoundation() {
        for s in samples {
            XCTAssertEqual(s.trimmed(), s.trimmingCharacters(in: .whitespacesAndNewlines), "\(s.unicodeScalars.map(\.value))")
            XCTAssertEqual(s.trimmed(newlines: false), s.trimmingCharacters(in: .whitespaces), "\(s.unicodeScalars.map(\.value))")
            XCTAssertEqual(s[...].trimmed(), s.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    func testPathTextMatchesNSString() {
        for p in ["/a/b", "/a/b/", "/a", "/", "a/b", "/a//b", "//a", "./x", "/tmp/sock.d/tidings.sock"] {
            XCTAssertEqual(PathText.lastComponent(p), (p as NSString).lastPathComponent, p)
            XCTAssertEqual(PathText.parent(p), (p as NSString).deletingLastPathComponent, p)
        }
        // (corelibs' path methods trap on "" and "a")
        XCTAssertEqual(PathText.lastComponent("a"), "a")
        XCTAssertEqual(PathText.parent("a"), "")
        XCTAssertEqual(PathText.lastComponent(""), "")
        XCTAssertEqual(PathText.parent(""), "")
        for (folder, name) in [("/srv", "./x"), ("/srv/", "x/y"), ("/", "bin/x"), ("", "x/y"), ("/srv", "/x")] {
            XCTAssertEqual(PathText.appending(name, to: folder), (folder as NSString).appendingPathComponent(name), "\(folder) + \(name)")
        }
    }

    func testMakeDirectoriesMakesEveryMissingFolderPrivateAndNamesTheOneItCannot() throws {
        let root = FileManager.default.temporaryDirectory.path + "/essentials-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        XCTAssertNil(makeDirectories("\(root)/a/b/c", mode: 0o700))
        for folder in ["\(root)/a", "\(root)/a/b", "\(root)/a/b/c"] {
            var st = stat()
            XCTAssertEqual(stat(folder, &st), 0, folder)
            XCTAssertEqual(st.st_mode & S_IFMT, S_IFDIR, folder)
            XCTAssertEqual(st.st_mode & 0o777, 0o700, folder)
        }
        XCTAssertNil(makeDirectories("\(root)/a/b/c", mode: 0o700), "an existing folder is fine")
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(root)/file", contents: Data()))
        let failure = try XCTUnwrap(makeDirectories("\(root)/file/x/y", mode: 0o700))
        XCTAssertEqual(failure.path, "\(root)/file/x")
        XCTAssertEqual(failure.errno, ENOTDIR)
    }

    func testDetachedThreadRunsTheBodyUnderItsName() {
        let seen = Mutex<String?>(nil)
        let done = expectation(description: "ran")
        XCTAssertTrue(startDetachedThread(name: "exec a-very-long-program-name") {
            let comm = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
            seen.withLock { $0 = comm }
            done.fulfill()
        })
        wait(for: [done], timeout: 60)
        XCTAssertEqual(seen.withLock { $0 }, "exec a-very-lon\n", "cut to the 15 bytes Linux keeps")
    }
}
