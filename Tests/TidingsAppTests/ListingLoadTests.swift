import FoundationEssentials
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPluginAPI

/// The listing load of `tidings sources` and `tidings status` (issue 33): no provider made of a
/// source that holds no secret, yet the same sources, settings, warnings and shared-setting
/// errors (at FILE:LINE) as the load every other command does, on the same files.
final class ListingLoadTests: XCTestCase {
    /// A full load and a listing load of one directory: both lenient, as `sources` is.
    func loadBoth(
        _ text: String, plugins: [String: String]
    ) throws -> (full: Result<TidingsConfig, ConfigErrors>, listing: Result<TidingsConfig, ConfigErrors>) {
        let dir = try scratchDirectory()
        try write(text, to: "\(dir)/tidings.toml")
        try write("", to: "\(dir)/plugins.d/.keep")
        for (name, content) in plugins { try write(content, to: "\(dir)/plugins.d/\(name)") }
        func load(listing: Bool) -> Result<TidingsConfig, ConfigErrors> {
            var loader = testLoader
            loader.secrets = .lenient
            loader.listing = listing
            do { return .success(try loader.load(file: "\(dir)/tidings.toml")) } catch let e as ConfigErrors { return .failure(e) } catch {
                return .failure(ConfigErrors([ConfigError(file: dir, line: nil, "\(error)")]))
            }
        }
        return (load(listing: false), load(listing: true))
    }

    func testAListingMakesNoProviderOfASourceWithoutSecretsAndShowsWhatAFullLoadShows() throws {
        let (full, listing) = try loadBoth(
            """
            [defaults]
            interval = "10m"
            [sources.main]
            provider = "feed"
            url = "http://127.0.0.1:9/feed.xml"
            group = "News"
            """,
            plugins: [
                "api.toml": "provider = \"http-json\"\nurl = \"http://127.0.0.1:9/items\"\nkey = \"/id\"\ninterval = \"1m\"\n",
                "off.toml": "provider = \"page\"\nurl = \"http://127.0.0.1:9/\"\nselect = \"css:#x\"\nenabled = false\n",
                "token.toml": "provider = \"http-json\"\nurl = \"http://127.0.0.1:9/t\"\nheaders = { Authorization_env = \"TIDINGS_TEST_UNSET_TOKEN\" }\n",
            ])
        let f = try full.get()
        let l = try listing.get()
        XCTAssertEqual(l.sources.map(\.name), ["api", "main", "off", "token"])
        for (a, b) in zip(f.sources, l.sources) {
            XCTAssertEqual(a.name, b.name)
            XCTAssertEqual(a.provider, b.provider)
            XCTAssertEqual(a.settings, b.settings, a.name)
            XCTAssertEqual(a.file, b.file)
            XCTAssertEqual(a.line, b.line)
            XCTAssertEqual(a.flapWindow, b.flapWindow)
        }
        XCTAssertEqual(l.source(named: "main")?.settings.group, "News")
        XCTAssertEqual(l.source(named: "api")?.settings.interval, 60)
        // No provider made, but where the table may hold a secret (its warning comes from reading it).
        XCTAssertEqual(l.sources.map { $0.instance is ListedProvider }, [true, true, true, false])
        XCTAssertFalse(f.sources.contains { $0.instance is ListedProvider })
        XCTAssertEqual(f.warnings, l.warnings)
        XCTAssertTrue(l.warnings.contains { $0.contains("TIDINGS_TEST_UNSET_TOKEN") }, "\(l.warnings)")
        // The config hash (auth-failed is told by it) is the full load's once worked out.
        XCTAssertEqual(l.source(named: "token")?.configHash, f.source(named: "token")?.configHash)
        XCTAssertEqual(l.source(named: "api")?.configHash, "")
        var completed = l
        completed.completeConfigHashes(for: ["api", "main"])
        XCTAssertEqual(completed.sources.map(\.configHash)[0...1], f.sources.map(\.configHash)[0...1])
        XCTAssertEqual(completed.source(named: "off")?.configHash, "")
    }

    func testAListingReportsTheSharedSettingErrorsAFullLoadReportsAtTheirLines() throws {
        let (full, listing) = try loadBoth(
            "[sources.twice]\nprovider = \"feed\"\nurl = \"http://127.0.0.1:9/\"\n",
            plugins: [
                "a.toml": "provider = \"http-json\"\nurl = \"http://127.0.0.1:9/\"\ninterval = \"soon\"\n",
                "b.toml": "provider = \"nosuch\"\n",
                "c.toml": "url = \"http://127.0.0.1:9/\"\n",
                "d.toml": "provider = \"feed\"\nurl = [\n",
                "e.toml": "provider = \"feed\"\nurl = \"http://127.0.0.1:9/\"\nenabled = \"yes\"\n",
                "twice.toml": "provider = \"feed\"\nurl = \"http://127.0.0.1:9/\"\n",
                "bad name.toml": "provider = \"feed\"\nurl = \"http://127.0.0.1:9/\"\n",
            ])
        guard case .failure(let f) = full, case .failure(let l) = listing else { return XCTFail("both loads must fail: \(full) \(listing)") }
        XCTAssertEqual(l.errors.map(\.description), f.errors.map(\.description))
        let lines = l.errors.map { e in "\(PathText.lastComponent(e.file)):\(e.line.map(String.init) ?? "-")" }
        XCTAssertEqual(
            lines, ["a.toml:3", "b.toml:1", "bad name.toml:-", "c.toml:-", "e.toml:3", "twice.toml:-", "d.toml:2"],
            l.errors.map(\.description).joined(separator: "\n"))
    }

    /// What only a provider checks is left to `config check` and to the commands that poll.
    func testAListingLeavesAProvidersOwnOptionsUnchecked() throws {
        let (full, listing) = try loadBoth(
            "", plugins: ["api.toml": "provider = \"http-json\"\nurl = \"ftp://127.0.0.1/\"\ncolour = 1\n"])
        guard case .failure(let f) = full else { return XCTFail("a full load refuses it") }
        XCTAssertEqual(f.errors.map(\.line), [2], f.description)
        XCTAssertEqual(try listing.get().sources.map(\.name), ["api"])
    }

    func testWhatMayHoldASecret() throws {
        func table(_ text: String) throws -> ConfigTable { try ConfigTable.parse(text, file: "/nonexistent/t.toml") }
        for text in [
            "password = \"x\"", "token_file = \"/t\"", "url_env = \"U\"", "app_secret_token = \"x\"", "Api_Key = \"x\"",
            "x_credential = \"c\"", "headers = { Accept = \"text/plain\" }", "url = \"https://u:p@127.0.0.1/\"", "[sub]\nbearer_token = \"x\"",
            "list = [\"imap://u:p@127.0.0.1/\"]",
        ] {
            XCTAssertTrue(OptionReader.mayHoldSecrets(try table(text)), text)
        }
        for text in ["provider = \"http-json\"\nurl = \"http://127.0.0.1:9/\"\nkey = \"/id\"\ntitle = \"{/title}\"", "email = \"me@example.com\"", ""] {
            XCTAssertFalse(OptionReader.mayHoldSecrets(try table(text)), text)
        }
    }
}
