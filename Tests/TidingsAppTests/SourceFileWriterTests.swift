import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPluginAPI

/// The writer of `tidings add` and `tidings import`: real files in a scratch config, loaded back
/// by the real loader.
final class SourceFileWriterTests: XCTestCase {
    /// A config directory with a main file (holding `mainSources`) and plugins.d.
    private func configDirectory(mainSources: String = "", plugins: [String: String] = [:]) throws -> (file: String, plugins: String) {
        let dir = try scratchDirectory()
        chmod(dir, 0o755)
        try write("[sinks.out]\ntype = \"stdout\"\n\(mainSources)", to: "\(dir)/tidings.toml", mode: 0o644)
        try FileManager.default.createDirectory(atPath: "\(dir)/plugins.d", withIntermediateDirectories: true)
        chmod("\(dir)/plugins.d", 0o755)
        for (name, text) in plugins { try write(text, to: "\(dir)/plugins.d/\(name)", mode: 0o644) }
        return ("\(dir)/tidings.toml", "\(dir)/plugins.d")
    }

    private func writer(_ c: (file: String, plugins: String)) -> SourceFileWriter {
        SourceFileWriter(pluginsDir: c.plugins, inventory: SourceInventory.read(configFile: c.file, pluginsDir: c.plugins))
    }

    private func mode(_ path: String) -> Int {
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0, path)
        return Int(st.st_mode & 0o777)
    }

    private func contents(_ dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted()
    }

    func testBasicStringsRoundTripThroughTheTOMLParser() throws {
        let hostile = "a \"quoted\" back\\slash\nnew line\ttab\r\u{01}\u{7F} ünïcode ✓ ''' \"\"\" ${x} # not a comment"
        let draft = SourceDraft(
            name: "x", provider: "page",
            options: [
                SourceOption("url", .string("http://127.0.0.1/a?b=\"c\""), comment: "first line\nsecond line"),
                SourceOption("select", .string(hostile)),
                SourceOption("ignore", .strings([hostile, "plain"])),
                SourceOption("headers", .table([("Accept", hostile), ("X-Odd Name", "v")])),
                SourceOption("each", .boolean(true)),
                SourceOption("max_tries", .integer(3)),
            ],
            comments: ["from a test", "with \"quotes\""])
        let text = SourceFileWriter.render(draft, name: "x")
        let t = try ConfigTable.parse(text, file: "/t.toml")
        guard case .string(let sel)? = t["select"]?.value else { return XCTFail(text) }
        XCTAssertEqual(sel, hostile)
        guard case .array(let ignore)? = t["ignore"]?.value, case .string(let first) = ignore.first?.value else { return XCTFail(text) }
        XCTAssertEqual(first, hostile)
        guard case .table(let h)? = t["headers"]?.value, case .string(let accept)? = h["Accept"]?.value,
            case .string(let odd)? = h["X-Odd Name"]?.value
        else { return XCTFail(text) }
        XCTAssertEqual(accept, hostile)
        XCTAssertEqual(odd, "v")
        guard case .bool(true)? = t["each"]?.value, case .int(3)? = t["max_tries"]?.value else { return XCTFail(text) }
        XCTAssertTrue(text.hasPrefix("# from a test\n# with \"quotes\"\n"), text)
        XCTAssertTrue(text.contains("# first line\n# second line\nurl = "), text)
        XCTAssertEqual(t.keys.first, "provider")
    }

    func testAWrittenFeedLoadsAndIsNotWritableByOthers() throws {
        let c = try configDirectory()
        var w = writer(c)
        let draft = SourceDraft(
            name: "Example Blog!", provider: "feed",
            options: [SourceOption("url", .string("http://127.0.0.1:8080/feed.xml")), SourceOption("interval", .string("1h"))],
            comments: ["Found at http://127.0.0.1:8080/"], watchedURL: "http://127.0.0.1:8080/feed.xml")
        let plan = try w.plan(draft)
        XCTAssertEqual(plan.action, .write)
        XCTAssertEqual(plan.name, "example-blog")
        XCTAssertEqual(plan.path, c.plugins + "/example-blog.toml")
        try w.write(plan)
        XCTAssertEqual(mode(plan.path), 0o644)
        XCTAssertEqual(try String(contentsOfFile: plan.path, encoding: .utf8), plan.text)
        XCTAssertEqual(contents(c.plugins), ["example-blog.toml"], "no temporary file left")
        let config = try testLoader.load(file: c.file)
        XCTAssertEqual(config.sources.map(\.name), ["example-blog"])
        XCTAssertEqual(config.sources.first?.provider, "feed")
        XCTAssertEqual(config.sources.first?.settings.interval, 3600)
        // The same address again (written differently) is reported, and nothing is written.
        let again = try w.plan(SourceDraft(name: "other", provider: "feed", watchedURL: "HTTP://127.0.0.1:8080/feed.xml/#top"))
        XCTAssertEqual(again.action, .alreadyWatched(by: "example-blog"))
        try w.write(again)
        XCTAssertEqual(contents(c.plugins), ["example-blog.toml"])
        // Read afresh from the files, too.
        XCTAssertEqual(writer(c).inventory.watcher(of: "http://127.0.0.1:8080/feed.xml"), "example-blog")
    }

    func testSecretsGoToFilesOfTheirOwnNeverInline() throws {
        let c = try configDirectory()
        var w = writer(c)
        let draft = SourceDraft(
            name: "me@mail", provider: "imap",
            options: [SourceOption("url", .string("imaps://127.0.0.1:9993/INBOX")), SourceOption("username", .string("me"))],
            watchedURL: "imaps://me@127.0.0.1:9993/INBOX", secrets: [SecretDraft(option: "password", value: "s3cret-pa$$")])
        let plan = try w.plan(draft)
        XCTAssertEqual(plan.name, "me-mail")
        try w.write(plan)
        XCTAssertFalse(plan.text.contains("s3cret"), plan.text)
        XCTAssertTrue(plan.text.contains("password_file = \"secrets/me-mail.password\""), plan.text)
        let secret = c.plugins + "/secrets/me-mail.password"
        XCTAssertEqual(try String(contentsOfFile: secret, encoding: .utf8), "s3cret-pa$$\n")
        XCTAssertEqual(mode(secret), 0o600)
        XCTAssertEqual(mode(c.plugins + "/secrets"), 0o700)
        XCTAssertEqual(mode(plan.path), 0o644)
        let config = try testLoader.load(file: c.file)
        XCTAssertEqual(config.sources.map(\.name), ["me-mail"])
        // The configured imap source's address includes its user: the same mailbox is watched.
        XCTAssertEqual(writer(c).inventory.watcher(of: "imaps://me@127.0.0.1:9993/INBOX/"), "me-mail")
        XCTAssertNil(writer(c).inventory.watcher(of: "imaps://you@127.0.0.1:9993/INBOX"))
    }

    func testASecretNobodyGaveIsWrittenDisabledWithWhatToDo() throws {
        let c = try configDirectory()
        var w = writer(c)
        let draft = SourceDraft(
            name: "mail", provider: "imap",
            options: [SourceOption("url", .string("imaps://127.0.0.1/INBOX")), SourceOption("username", .string("me"))],
            secrets: [SecretDraft(option: "password", value: nil)])
        let plan = try w.plan(draft)
        try w.write(plan)
        XCTAssertTrue(plan.text.contains("enabled = false"), plan.text)
        XCTAssertTrue(plan.text.contains("Put the secret in secrets/mail.password"), plan.text)
        XCTAssertEqual(try String(contentsOfFile: c.plugins + "/secrets/mail.password", encoding: .utf8), "CHANGE-ME-mail-password\n")
        XCTAssertEqual(mode(c.plugins + "/secrets/mail.password"), 0o600)
        let config = try testLoader.load(file: c.file)
        XCTAssertEqual(config.sources.first?.settings.enabled, false)
        XCTAssertEqual(config.warnings.filter { $0.contains("placeholder") }, [], "a disabled source's placeholder is expected")
    }

    func testNamesAreNeverTakenTwiceAndAnExactNameThatExistsIsRefused() throws {
        let c = try configDirectory(
            mainSources: "[sources.\"example.org\"]\nprovider = \"feed\"\nurl = \"https://example.org/a.xml\"\n",
            plugins: ["example.org-2.toml": "provider = \"feed\"\nurl = \"http://127.0.0.1/b.xml\"\n"])
        var w = writer(c)
        let plan = try w.plan(SourceDraft(name: "Example.ORG", provider: "feed", watchedURL: "http://127.0.0.1/c.xml"))
        XCTAssertEqual(plan.name, "example.org-3")
        try w.write(plan)
        // The writer knows what it wrote: the next one of a batch gets the next number.
        XCTAssertEqual(try w.plan(SourceDraft(name: "example.org", provider: "feed")).name, "example.org-4")
        XCTAssertThrowsError(try w.plan(SourceDraft(name: "example.org", provider: "feed"), exactName: true)) { e in
            XCTAssertTrue("\(e)".contains("exists already"), "\(e)")
            XCTAssertTrue("\(e)".contains("tidings.toml:"), "names where: \(e)")
        }
        XCTAssertThrowsError(try w.plan(SourceDraft(name: "../x", provider: "feed"), exactName: true))
        // The main file's source watches its URL too.
        XCTAssertEqual(try w.plan(SourceDraft(name: "y", provider: "feed", watchedURL: "https://EXAMPLE.org:443/a.xml")).action, .alreadyWatched(by: "example.org"))
    }

    func testAFileThatAppearsBeforeTheWriteIsNotReplacedAndNothingIsLeft() throws {
        let c = try configDirectory()
        var w = writer(c)
        let plan = try w.plan(SourceDraft(name: "late", provider: "imap", secrets: [SecretDraft(option: "password", value: "abcdef")]))
        try write("# someone else's\n", to: plan.path, mode: 0o644)
        XCTAssertThrowsError(try w.write(plan)) { e in XCTAssertTrue("\(e)".contains("exists already"), "\(e)") }
        XCTAssertEqual(try String(contentsOfFile: plan.path, encoding: .utf8), "# someone else's\n")
        // Raced past the name check: the link refuses, and no temporary file is left.
        XCTAssertThrowsError(try SourceFileWriter.createFile(plan.path, contents: "x", mode: 0o644)) { e in
            XCTAssertTrue("\(e)".contains("not overwriting"), "\(e)")
        }
        XCTAssertEqual(try String(contentsOfFile: plan.path, encoding: .utf8), "# someone else's\n")
        XCTAssertEqual(contents(c.plugins), ["late.toml"], "no secret, no temporary file")
    }

    func testAMissingPluginsFolderIsMadeNotWritableByOthersWhateverTheUmask() throws {
        let c = try configDirectory()
        let plugins = c.plugins + "/deeper/plugins.d"
        var w = SourceFileWriter(pluginsDir: plugins, inventory: SourceInventory())
        let old = umask(0o002)
        defer { umask(old) }
        try w.write(try w.plan(SourceDraft(name: "x", provider: "imap", secrets: [SecretDraft(option: "password", value: "abcdef")])))
        XCTAssertEqual(mode(plugins), 0o755)
        XCTAssertEqual(mode(plugins + "/secrets"), 0o700)
        XCTAssertEqual(mode(plugins + "/x.toml"), 0o644)
        XCTAssertEqual(mode(plugins + "/secrets/x.password"), 0o600)
    }

    /// Root adding to another user's plugins.d gives the files to that user (their daemon reads
    /// them; the trust rules accept them). Runs where the tests run as root.
    func testRootWritingIntoAnotherUsersFolderGivesThemTheFiles() throws {
        try XCTSkipIf(getuid() != 0, "needs root")
        let c = try configDirectory()
        XCTAssertEqual(chown(c.plugins, 65534, 65534), 0)
        var w = writer(c)
        try w.write(try w.plan(SourceDraft(name: "x", provider: "imap", secrets: [SecretDraft(option: "password", value: "abcdef")])))
        for p in [c.plugins + "/x.toml", c.plugins + "/secrets", c.plugins + "/secrets/x.password"] {
            var st = stat()
            XCTAssertEqual(stat(p, &st), 0)
            XCTAssertEqual(st.st_uid, 65534, p)
        }
    }

    func testSafeNamesAndNamesFromAddresses() {
        XCTAssertEqual(SourceFileWriter.safeName("  Hello, World!  ", fallback: "feed"), "hello-world")
        XCTAssertEqual(SourceFileWriter.safeName("../../etc/passwd", fallback: "feed"), "etc-passwd")
        XCTAssertEqual(SourceFileWriter.safeName("日本語", fallback: "feed"), "feed")
        XCTAssertEqual(SourceFileWriter.safeName(".hidden.", fallback: "feed"), "hidden")
        XCTAssertEqual(SourceFileWriter.safeName(String(repeating: "a", count: 100), fallback: "x").count, 48)
        XCTAssertEqual(SourceFileWriter.name(forURL: "https://www.Example.org/blog/atom.xml"), "example.org-blog")
        XCTAssertEqual(SourceFileWriter.name(forURL: "http://127.0.0.1:8080/feed.xml"), "127.0.0.1")
        XCTAssertEqual(SourceFileWriter.name(forURL: "https://github.com/octo/hello"), "github.com-octo-hello")
    }

    func testAddressesAreComparedNormalised() {
        let same = [
            "http://127.0.0.1/feed", "HTTP://127.0.0.1:80/feed/", "http://127.0.0.1/feed#x", "http://u:p@127.0.0.1/feed".replacing("u:p@", with: ""),
        ]
        for s in same { XCTAssertEqual(WatchedAddress.normalised(s), "http://127.0.0.1/feed", s) }
        XCTAssertEqual(WatchedAddress.normalised("https://Host.Example:443"), "https://host.example/")
        XCTAssertEqual(WatchedAddress.normalised("https://h:8443/a/?q=1"), "https://h:8443/a?q=1")
        XCTAssertNotEqual(WatchedAddress.normalised("https://h/a?q=1"), WatchedAddress.normalised("https://h/a?q=2"))
        XCTAssertNotEqual(WatchedAddress.normalised("http://h/Feed"), WatchedAddress.normalised("http://h/feed"), "paths keep their case")
        XCTAssertEqual(WatchedAddress.normalised("imaps://me:secret@h:993/INBOX"), "imaps://me@h/INBOX")
        XCTAssertNil(WatchedAddress.normalised("not an address"))
        XCTAssertEqual(WatchedAddress.normalised(WatchedAddress.certificateTarget("h:443")), "https://h/")
    }

    /// A source whose address is a secret (`url_file`, what `add` and `import` write for a URL
    /// with a password) still counts as watching that address: adding it again writes nothing.
    func testASourceWhoseURLIsInAFileStillWatchesIt() throws {
        let c = try configDirectory(plugins: ["private.toml": "provider = \"feed\"\nurl_file = \"secrets/private.url\"\n"])
        try FileManager.default.createDirectory(atPath: c.plugins + "/secrets", withIntermediateDirectories: true)
        try write("http://me:s3cret@127.0.0.1:8080/feed.xml\n", to: c.plugins + "/secrets/private.url", mode: 0o600)
        XCTAssertEqual(writer(c).inventory.watcher(of: "http://me:s3cret@127.0.0.1:8080/feed.xml"), "private")
        XCTAssertNil(writer(c).inventory.watcher(of: "http://me:s3cret@127.0.0.1:8080/other.xml"))
    }
}
