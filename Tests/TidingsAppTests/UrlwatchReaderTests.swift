import TidingsPluginAPI
import TidingsYAML
import XCTest

@testable import TidingsApp

final class UrlwatchReaderTests: XCTestCase {
    func read(_ yaml: String, check: @escaping UrlwatchReader.SelectionCheck = { _ in nil }) throws -> ImportReading {
        try UrlwatchReader(fileName: "urls.yaml", checkSelection: check).read(Array(yaml.utf8))
    }

    func option(_ d: SourceDraft, _ key: String) -> DraftValue? { d.options.first { $0.key == key }?.value }

    /// The two filter spellings urlwatch reads, onto select and ignore; job keys onto source keys.
    func testUrlJobsBecomePageSources() throws {
        let r = try read("""
            name: Jobs
            url: https://example.org/jobs
            max_tries: 3
            headers:
              Accept-Language: da
              User-Agent: Mozilla/5.0
            filter: css:ul.jobs > li,html2text,strip
            ---
            url: "http://127.0.0.1:8080/news"
            timeout: 20
            enabled: false
            filter:
              - xpath: //div[@id="news"]
              - html2text: re
              - grepi: "^Updated"
              - re.sub: '\\d+ visitors'
            ---
            url: https://example.org/a
            filter:
              - element-by-class: "big box"
            """)
        XCTAssertEqual(r.notImportable, [])
        XCTAssertEqual(r.drafts.count, 3)
        let a = r.drafts[0]
        XCTAssertEqual(a.provider, "page")
        XCTAssertEqual(a.name, "Jobs")
        XCTAssertEqual(a.watchedURL, "https://example.org/jobs")
        XCTAssertEqual(option(a, "url"), .string("https://example.org/jobs"))
        XCTAssertEqual(option(a, "select"), .string("css:ul.jobs > li"))
        XCTAssertEqual(option(a, "headers"), .table([("Accept-Language", "da")]))
        XCTAssertEqual(option(a, "user_agent"), .string("Mozilla/5.0"))
        XCTAssertEqual(option(a, "error_threshold"), .integer(3))
        XCTAssertEqual(option(a, "interval"), .string("1d"))
        XCTAssertTrue(a.comments[0].contains("urls.yaml, line 1, job \"Jobs\""), "\(a.comments)")
        let b = r.drafts[1]
        XCTAssertEqual(b.name, "http://127.0.0.1:8080/news")
        XCTAssertEqual(option(b, "select"), .string("xpath://div[@id=\"news\"]"))
        XCTAssertEqual(option(b, "ignore"), .strings(["^Updated", "\\d+ visitors"]))
        XCTAssertEqual(option(b, "timeout"), .string("20s"))
        XCTAssertEqual(option(b, "enabled"), .boolean(false))
        XCTAssertEqual(option(r.drafts[2], "select"), .string("css:[class=\"big box\"]"))
    }

    /// Every job that cannot be watched the same way is listed with its line and reason.
    func testWhatHasNoEquivalentIsRefusedWithLineAndReason() throws {
        let r = try read("""
            navigate: https://example.org/app
            ---
            url: https://example.org/b
            filter:
              - css: {selector: div, exclude: .ad}
            ---
            url: https://example.org/c
            filter: [{grep: "x"}]
            ---
            url: https://example.org/d
            data: a=1
            ---
            url: https://example.org/e
            headers: {Authorization: Bearer abc}
            ---
            url: https://example.org/f
            filter: [sha1sum]
            ---
            url: https://example.org/g
            filter: [{re.sub: {pattern: a, repl: b}}]
            ---
            url: https://example.org/h
            filter: [{css: div}, {xpath: //p}]
            ---
            url: https://example.org/i
            filter: [{css: "a + b"}]
            ---
            url: ftp://example.org/j
            ---
            url: https://example.org/k
            bogus: 1
            """, check: { $0.contains("+") ? "the combinator '+' is not supported" : nil })
        XCTAssertEqual(r.drafts, [])
        let lines = r.notImportable.map { $0.line ?? 0 }
        XCTAssertEqual(lines, [1, 5, 8, 11, 14, 17, 20, 23, 26, 28, 31], "\(r.notImportable)")
        let reasons = r.notImportable.map(\.reason)
        XCTAssertTrue(reasons[0].contains("browser job"))
        XCTAssertTrue(reasons[1].contains("'exclude' has no equivalent"))
        XCTAssertTrue(reasons[2].hasPrefix("filter grep: keeps only matching lines"))
        XCTAssertTrue(reasons[3].contains("request body"))
        XCTAssertTrue(reasons[4].contains("credential"), reasons[4])
        XCTAssertTrue(reasons[5].contains("checksum"))
        XCTAssertTrue(reasons[6].contains("replaces text"))
        XCTAssertTrue(reasons[7].contains("a second selection"))
        XCTAssertTrue(reasons[8].contains("the combinator '+' is not supported"))
        XCTAssertTrue(reasons[9].contains("ftp addresses"))
        XCTAssertTrue(reasons[10].contains("'bogus'"))
        XCTAssertEqual(r.notImportable[0].what, "https://example.org/app")
    }

    func testCommandJobsBecomeTextExecSources() throws {
        let r = try read("""
            name: disk
            command: df -h / | tail -1
            ---
            command: ./check
            stderr: stdout
            ---
            command: ls
            stderr: fail
            ---
            command: ls
            filter: [{grep: x}]
            """)
        XCTAssertEqual(r.drafts.count, 2)
        XCTAssertEqual(r.drafts[0].provider, "exec")
        XCTAssertEqual(r.drafts[0].watchedURL, nil)
        XCTAssertEqual(option(r.drafts[0], "command"), .strings(["/bin/sh", "-c", "df -h / | tail -1"]))
        XCTAssertEqual(option(r.drafts[0], "format"), .string("text"))
        XCTAssertEqual(option(r.drafts[1], "command"), .strings(["/bin/sh", "-c", "exec 2>&1\n./check"]))
        XCTAssertEqual(r.notImportable.map(\.line), [8, 11])
    }

    /// A password in a job's URL becomes a secret (url_file), never an inline option.
    func testPasswordInURLIsASecret() throws {
        let d = try XCTUnwrap(try read("url: https://me:pw@example.org/x\n").drafts.first)
        XCTAssertNil(option(d, "url"))
        XCTAssertEqual(d.secrets, [SecretDraft(option: "url", value: "https://me:pw@example.org/x")])
        XCTAssertEqual(d.watchedURL, "https://example.org/x")
    }

    /// A file that is not YAML throws (nothing is imported from half a file); an alias bomb too.
    func testUnreadableFileThrows() {
        XCTAssertThrowsError(try read("url: a\nfilter: [css: x\n"))
        var bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\n"
        for (p, n) in zip("abcdefg", "bcdefgh") { bomb += "\(n): &\(n) [" + Array(repeating: "*\(p)", count: 10).joined(separator: ",") + "]\n" }
        XCTAssertThrowsError(try read(bomb)) { e in XCTAssertTrue("\(e)".contains("aliases expand")) }
    }

    /// 10,000 jobs: read in one go (time in the e2e note, not asserted).
    func testTenThousandJobs() throws {
        var s = ""
        for i in 0..<10_000 { s += "name: job \(i)\nurl: https://example.org/\(i)\nfilter: [{css: \"#a\"}, html2text]\n---\n" }
        let r = try read(s)
        XCTAssertEqual(r.drafts.count, 10_000)
        XCTAssertEqual(r.drafts[9_999].name, "job 9999")
    }
}

final class URLListReaderTests: XCTestCase {
    func testOneAddressPerLineWithComments() {
        let (addresses, refused) = URLListReader.addresses(Array("# mine\nhttps://a.example/\n\n  https://b.example/feed  # b\r\nx y\n".utf8))
        XCTAssertEqual(addresses.map(\.address), ["https://a.example/", "https://b.example/feed"])
        XCTAssertEqual(addresses.map(\.line), [2, 4])
        XCTAssertEqual(refused, [NotImportable(what: "x", line: 5, reason: "one address per line (then a # comment, if any)")])
    }
}
