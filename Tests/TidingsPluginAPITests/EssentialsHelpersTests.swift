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

    func testScalarTextMatchesFoundation() {
        let texts = samples + ["[::1]", "[", "]]x[[", "\"'tok'\"", "a-b_c", "a\\b\"c", "\\\u{301}x", "x\r\ny\u{2028}z\u{85}", "+0000 +0000", "é\u{301}-"]
        for s in texts {
            let id = "\(s.unicodeScalars.map(\.value))"
            XCTAssertEqual(s.trimmed { $0 == "[" || $0 == "]" }, s.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), id)
            XCTAssertEqual(s.trimmed { $0 == "\"" || $0 == "'" }, s.trimmingCharacters(in: CharacterSet(charactersIn: "\"'")), id)
            for (target, replacement) in [("\\", "\\\\"), ("\"", "\\\""), ("-", "+"), ("+0000", "Z"), ("\n", " ")] {
                XCTAssertEqual(s.replacingScalars(target, with: replacement), s.replacingOccurrences(of: target, with: replacement, options: .literal), id)
            }
            XCTAssertEqual(s.replacingLineBreaks(with: " "), s.components(separatedBy: .newlines).joined(separator: " "), id)
        }
    }

    func testPercentEncodingMatchesFoundation() {
        let unreserved = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
        let printable = CharacterSet(charactersIn: Unicode.Scalar(0x21)...Unicode.Scalar(0x7E))
        for s in samples + ["a b/c?d=e&f", "100%", "ünï ☃ 🙂", "\u{1B}[31m", "~-._*+", "Ωmega٣"] {
            let id = "\(s.unicodeScalars.map(\.value))"
            XCTAssertEqual(s.percentEncoded(keeping: isUnreservedURLByte), s.addingPercentEncoding(withAllowedCharacters: unreserved), id)
            XCTAssertEqual(s.percentEncoded { (0x21...0x7E).contains($0) }, s.addingPercentEncoding(withAllowedCharacters: printable), id)
            let encoded = s.percentEncoded(keeping: isUnreservedURLByte)
            XCTAssertEqual(encoded.percentDecoded, s, id)
        }
        for s in ["", "a%20b", "%7e%7E", "a+b", "%", "%4", "%zz", "%C3%A9", "%C3", "%FF", "100%", "%00x", "%e2%98%83", "é%41"] {
            XCTAssertEqual(s.percentDecoded, s.removingPercentEncoding, s)
        }
    }

    func testHTTPDateMatchesDateFormatter() {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        let dates = [
            "Sun, 06 Nov 1994 08:49:37 GMT", "Wed, 21 Oct 2015 07:28:00 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", "Tue, 29 Feb 2028 23:59:59 GMT",
            "Mon, 31 Dec 2040 12:00:00 GMT", "wed, 21 oct 2015 07:28:00 gmt", "Wed, 21 Oct 2015 07:28:00 UTC", "Wed, 1 Oct 2015 7:28:00 GMT",
            "Wed, 21 Oct 2015 07:28:00", "21 Oct 2015 07:28:00 GMT", "Wed 21 Oct 2015 07:28:00 GMT", "Wed, 21 Foo 2015 07:28:00 GMT",
            "Wed, 21 Oct 2015 25:28:00 GMT", "Wed, 21 Oct 2015 07:61:00 GMT", "Wed, 21 Oct 2015 07:28 GMT", " Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT  ",
            "", "120", "Wed, 21 Oct 2015 07:28:00 GMT x", "Wed,  21 Oct 2015 07:28:00 GMT",
        ]
        for text in dates {
            XCTAssertEqual(HTTPDate.parse(text), f.date(from: text), text)
        }
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT")?.timeIntervalSince1970, 784_111_777)
        XCTAssertNil(HTTPDate.parse("Wed, 21 Oct 15 07:28:00 GMT"), "a two-digit year (DateFormatter: the year 15)")
    }

    func testStandardizedPathMatchesNSString() throws {
        let root = FileManager.default.temporaryDirectory.path + "/standardized-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: "\(root)/real/sub", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: "\(root)/abs", withDestinationPath: "\(root)/real")
        try FileManager.default.createSymbolicLink(atPath: "\(root)/rel", withDestinationPath: "real/sub")
        try FileManager.default.createSymbolicLink(atPath: "\(root)/chain", withDestinationPath: "\(root)/abs")
        let paths = [
            "/", "//", "/a/b", "/a//b/./c/", "/a/b/../c", "/../x", "/a/..", "\(root)/abs/sub/f", "\(root)/rel/f", "\(root)/rel/../f",
            "\(root)/abs/../f", "\(root)/./abs//sub/", "\(root)/chain/sub", "x/y", "x/../y", "./x", "x/./y/",
        ]
        for p in paths {
            XCTAssertEqual(PathText.standardized(p), (p as NSString).standardizingPath, p)
        }
        XCTAssertEqual(PathText.standardized("\(root)/chain/sub/f"), "\(root)/real/sub/f")
    }

    func testReadBytesAndWriteAllThroughAPipe() {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let text = Array(String(repeating: "tidings ", count: 5000).utf8)
        XCTAssertTrue(writeAll(fds[1], text))
        close(fds[1])
        XCTAssertEqual(readBytes(fds[0], upTo: 100), Array(text.prefix(100)), "stops at the limit")
        XCTAssertEqual(readBytes(fds[0], upTo: 1 << 20), Array(text.dropFirst(100)), "then reads to the end")
        XCTAssertEqual(readBytes(fds[0], upTo: 10), [])
        close(fds[0])
        XCTAssertNil(readBytes(fds[0], upTo: 10), "a closed descriptor is an error")
        XCTAssertFalse(writeAll(fds[1], [1]))
    }

    func testDecimalTextMatchesStringFormat() {
        let values: [Double] = [0, -0.0, 0.05, 0.25, 0.35, 1.45, 2.5, 999.95, 1e-9, 123_456.789_5, -3.14159, 1e300, .infinity, -.infinity, .nan, 0.0005]
        for v in values {
            for digits in [0, 1, 3] {
                XCTAssertEqual(decimalText(v, digits: digits), String(format: "%.\(digits)f", v), "\(v) with \(digits)")
            }
        }
    }
}
