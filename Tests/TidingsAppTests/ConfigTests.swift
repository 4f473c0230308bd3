import Foundation
import TidingsProviders
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class ConfigTests: XCTestCase {
    let jsonSource = """
        [sources.api]
        provider = "http-json"
        url = "http://127.0.0.1:9/items"
        """

    func testValidConfigLoadsWithDefaultsAndOverrides() throws {
        let c = try loadConfig(
            """
            [defaults]
            interval = "2m"
            jitter = 0.2
            [sinks.out]
            type = "stdout"
            format = "json"
            [[routes]]
            match = { severity = ["critical", "warning"], source = "api" }
            sinks = ["out"]
            continue = true
            \(jsonSource)
            timeout = "5s"
            """)
        XCTAssertEqual(c.sources.map(\.name), ["api"])
        XCTAssertEqual(c.sources[0].settings.interval, 120)
        XCTAssertEqual(c.sources[0].settings.jitter, 0.2)
        XCTAssertEqual(c.sources[0].settings.timeout, 5)
        XCTAssertEqual(c.routes, [Route(source: ["api"], severity: ["critical", "warning"], sinks: ["out"], continueMatching: true)])
    }

    /// Issue 9, item 13: `max_events` in [defaults] and per source (default 1000).
    func testMaxEventsFromDefaultsAndPerSource() throws {
        let c = try loadConfig(
            """
            [defaults]
            max_events = 50
            \(jsonSource)
            [sources.other]
            provider = "http-json"
            url = "http://127.0.0.1:9/other"
            max_events = 7
            """)
        XCTAssertEqual(c.sources.map(\.settings.maxEvents), [50, 7])
        XCTAssertEqual(try loadConfig(jsonSource).sources[0].settings.maxEvents, 1000)
        let errors = try configErrors("[defaults]\nmax_events = 0\n")
        XCTAssertEqual(errors.map(\.line), [2], errors.map(\.description).joined(separator: "\n"))
    }

    func testSyntaxErrorNamesFileAndLine() throws {
        let errors = try configErrors("a = 1\n\nb = [\n")
        XCTAssertEqual(errors.count, 1)
        XCTAssertEqual(errors[0].line, 3, errors[0].description)
        XCTAssertTrue(errors[0].description.contains("tidings.toml:3: TOML syntax"), errors[0].description)
    }

    func testUnknownKeyIsAnErrorAtItsLine() throws {
        let errors = try configErrors(
            """
            [defaults]
            interval = "5m"
            intervall = "1m"
            """)
        XCTAssertEqual(errors.map(\.line), [3])
        XCTAssertTrue(errors[0].message.contains("unknown key 'intervall'"), errors[0].message)
    }

    func testUnknownKeyInSourceAndInlineTable() throws {
        let errors = try configErrors(
            """
            [sinks.out]
            type = "stdout"
            [[routes]]
            sinks = ["out"]
            [[routes]]
            match = { sauce = "x" }
            sinks = ["out"]
            \(jsonSource)
            itmes = "/x"
            """)
        XCTAssertEqual(errors.map(\.line), [6, 11], errors.map(\.description).joined(separator: "\n"))
        XCTAssertTrue(errors[0].message.contains("'sauce'"))
        XCTAssertTrue(errors[1].message.contains("'itmes'"))
    }

    func testWrongTypesAndBadValuesNameTheirLines() throws {
        let errors = try configErrors(
            """
            max_concurrent = "lots"
            [defaults]
            interval = 5
            jitter = 2.0
            timeout = "soon"
            """)
        XCTAssertEqual(errors.map(\.line), [1, 3], errors.map(\.description).joined(separator: "\n"))
        XCTAssertTrue(errors[0].message.contains("must be an integer"))
        XCTAssertTrue(errors[1].message.contains("duration"))
    }

    func testUnknownProviderSinkAndRouteTarget() throws {
        let errors = try configErrors(
            """
            [sinks.a]
            type = "pigeon"
            [[routes]]
            sinks = ["nowhere"]
            [sources.x]
            provider = "carrier"
            """)
        let text = errors.map(\.description).joined(separator: "\n")
        XCTAssertTrue(text.contains(":2: sink \"a\": unknown sink type 'pigeon'"), text)
        XCTAssertTrue(text.contains(":4: route #1: no sink named 'nowhere'"), text)
        XCTAssertTrue(text.contains(":6: source \"x\": unknown provider 'carrier'"), text)
    }

    func testPluginFilesBecomeSourcesAndIgnoredSuffixesAreIgnored() throws {
        let script = "#!/bin/sh\necho '{\"key\":\"k\",\"title\":\"t\"}'\n"
        let c = try loadConfig(
            "",
            plugins: [
                "api.toml": ("provider = \"http-json\"\nurl = \"http://127.0.0.1:9/\"\n", 0o644),
                "probe": (script, 0o755),
                "probe2": (script, 0o755),
                "probe2.toml": ("format = \"jsonl\"\ninterval = \"1m\"\n", 0o644),
                "old.toml~": ("garbage", 0o644),
                "off.toml.disabled": ("garbage", 0o644),
                "x.toml.dpkg-old": ("garbage", 0o644),
                "README": ("not executable", 0o644),
            ])
        XCTAssertEqual(c.sources.map(\.name), ["api", "probe", "probe2"])
        XCTAssertEqual(c.sources.map(\.provider), ["http-json", "exec", "exec"])
        XCTAssertEqual(c.source(named: "probe2")?.settings.interval, 60)
    }

    func testWorldWritablePluginIsRefused() throws {
        let errors = try configErrors("", plugins: ["evil": ("#!/bin/sh\n", 0o777)])
        XCTAssertEqual(errors.count, 1)
        XCTAssertTrue(errors[0].description.contains("plugins.d/evil: plugin is writable by group or others"), errors[0].description)
    }

    func testInlineSecretInReadableFileIsRefused() throws {
        let text = """
            [sources.api]
            provider = "http-json"
            url = "http://127.0.0.1:9/"
            headers = { Authorization = "Bearer s3cr3t-value" }
            """
        let errors = try configErrors(text, mode: 0o644)
        XCTAssertEqual(errors.map(\.line), [4], errors.map(\.description).joined(separator: "\n"))
        XCTAssertTrue(errors[0].message.contains("readable by group or others"))
        XCTAssertFalse(errors[0].description.contains("s3cr3t-value"))
        XCTAssertEqual(try configErrors(text, mode: 0o600), [])
    }

    func testPasswordInAURLIsASecret() throws {
        let text = """
            [sources.api]
            provider = "http-json"
            url = "http://reader:pa%24s-in-url@127.0.0.1:9/"
            [sinks.hook]
            type = "webhook"
            url = "http://hook:hook-pass-42@127.0.0.1:9/in"
            """
        let errors = try configErrors(text, mode: 0o644)
        XCTAssertEqual(Set(errors.map(\.line)), [3, 6], errors.map(\.description).joined(separator: "\n"))
        XCTAssertTrue(errors.allSatisfy { $0.message.contains("readable by group or others") && !$0.message.contains("in-url") && !$0.message.contains("pass-42") }, errors.map(\.message).joined(separator: "\n"))
        XCTAssertEqual(try configErrors(text, mode: 0o600), [])
        let basic = "Basic " + Data("reader:pa$s-in-url".utf8).base64EncodedString()
        // (The Redactor is process-wide: other tests' secrets may be scrubbed out of this text too.)
        let scrubbed = Redactor.shared.scrub("echo: pa$s-in-url, pa%24s-in-url, \(basic), hook-pass-42")
        for leak in ["pa$s-in-url", "pa%24s-in-url", String(basic.dropFirst(6)), "hook-pass-42"] {
            XCTAssertFalse(scrubbed.contains(leak), scrubbed)
        }
    }

    func testSecretFromFileAndEnvironment() throws {
        let dir = try scratchDirectory()
        try write("tok-from-file\n", to: "\(dir)/tok")
        setenv("TIDINGS_TEST_TOKEN", "tok-from-env", 1)
        let c = try loadConfig(
            """
            [sources.a]
            provider = "http-json"
            url = "http://127.0.0.1:9/"
            headers = { Authorization_file = "\(dir)/tok", X-Key_env = "TIDINGS_TEST_TOKEN", Accept = "text/json" }
            """)
        let p = try XCTUnwrap(c.sources[0].instance as? HTTPJSONProvider)
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: p.headers.pairs)["Authorization"], "tok-from-file")
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: p.headers.pairs)["X-Key"], "tok-from-env")
        XCTAssertEqual(Redactor.shared.scrub("got tok-from-file and tok-from-env"), "got ‹redacted› and ‹redacted›")

        let missing = try configErrors(
            """
            [sources.a]
            provider = "http-json"
            url = "http://127.0.0.1:9/"
            headers = { Authorization_env = "TIDINGS_TEST_UNSET_VAR" }
            """)
        XCTAssertEqual(missing.map(\.line), [4])
        XCTAssertTrue(missing[0].message.contains("TIDINGS_TEST_UNSET_VAR"))
    }

    func testEveryUnknownKeyOfATableIsReported() throws {
        let errors = try configErrors(
            """
            [sinks.out]
            type = "stdout"
            colour = true
            formatt = "json"
            """)
        XCTAssertEqual(errors.map(\.line), [3, 4], errors.map(\.description).joined(separator: "\n"))
        XCTAssertEqual(errors.map { $0.message.contains("'colour'") || $0.message.contains("'formatt'") }, [true, true])
    }

    func testErrorsOfEveryPluginAreReportedAfterABrokenOne() throws {
        let errors = try configErrors(
            "",
            plugins: [
                "a.toml": ("provider = \"http-json\"\nurl = \"http://127.0.0.1:9/\n", 0o600),
                "b.toml": ("provider = \"http-json\"\nurl = \"http://127.0.0.1:9/\"\nitmes = \"/x\"\n", 0o600),
            ])
        let text = errors.map(\.description).joined(separator: "\n")
        XCTAssertTrue(text.contains("a.toml:2: TOML syntax"), text)
        XCTAssertTrue(text.contains("b.toml:3: source \"b\": unknown key 'itmes'"), text)
    }

    /// Plugins are read, checked and built on parallel workers a chunk at a time (ConfigLoader.scanPlugins):
    /// what a load reports must not depend on that. Across several chunks, every plugin's errors and
    /// warnings come in file-name order; a plugin that is also declared in the main file is reported as
    /// declared twice (and nothing else); a misnamed one by its name; a symbolic link to a plugin file and
    /// a group-writable plugin file are checked where they lead, as before.
    func testPluginsAcrossChunksReportInFileOrder() throws {
        func pad3(_ i: Int) -> String { String(repeating: "0", count: max(0, 3 - "\(i)".count)) + "\(i)" }
        var plugins: [String: (String, Int)] = [:]
        for i in 0..<600 {
            plugins["p\(pad3(i)).toml"] = ("provider = \"http-json\"\nurl = \"http://127.0.0.1:9/\(i)\"\n", 0o600)
        }
        let broken = [5, 257, 300, 599]
        for i in broken {
            plugins["p\(pad3(i)).toml"] = ("provider = \"http-json\"\nurl = \"http://127.0.0.1:9/\"\nbogus\(i) = 1\n", 0o600)
        }
        plugins["p400.toml"] = ("provider = \"http-json\"\nurl = \"http://127.0.0.1:9/\"\n", 0o620)
        plugins["api.toml"] = ("provider = \"http-json\"\nurl = \"http://127.0.0.1:9/\"\nbogus = 1\n", 0o600)
        plugins["bad name.toml"] = ("provider = \"http-json\"\nurl = \"http://127.0.0.1:9/\"\nbogus = 1\n", 0o600)
        let errors = try configErrors(jsonSource, plugins: plugins)
        let text = errors.map(\.description)
        XCTAssertEqual(text.count, 7, text.joined(separator: "\n"))
        XCTAssertTrue(text[0].hasSuffix("plugins.d/api.toml: source \"api\" is declared twice (first at \(errors[0].file.dropLast("plugins.d/api.toml".count))tidings.toml:1)"), text[0])
        XCTAssertTrue(text[1].hasSuffix("plugins.d/bad name.toml: source name \"bad name\" may use only letters, digits, '.', '_' and '-'"), text[1])
        for (k, i) in broken.prefix(3).enumerated() {
            XCTAssertTrue(text[2 + k].contains("plugins.d/p\(pad3(i)).toml:3: source \"p\(pad3(i))\": unknown key 'bogus\(i)'"), text[2 + k])
        }
        XCTAssertTrue(text[5].contains("plugins.d/p599.toml:3: source \"p599\": unknown key 'bogus599'"), text[5])
        // Problems found reading plugins (syntax, trust) follow those found building them, as before.
        XCTAssertTrue(text[6].hasSuffix("plugins.d/p400.toml: plugin config is writable by group or others (mode 620): chmod go-w \(errors[6].file)"), text[6])

        // Warnings (lenient secrets) in file order too, and a plugin file that is a symbolic link is read.
        var lenient: [String: (String, Int)] = [:]
        for i in 0..<300 {
            let secret = i % 100 == 7 ? "password_env = \"TIDINGS_TEST_UNSET_PASSWORD\"\n" : "password = \"x\"\n"
            lenient["s\(pad3(i)).toml"] = (
                "provider = \"sportdate\"\nbase_url = \"http://127.0.0.1:9\"\nemail = \"me@example.com\"\n\(secret)", 0o600
            )
        }
        let c = try loadConfig("", plugins: lenient, secrets: .lenient)
        XCTAssertEqual(c.sources.count, 300)
        let unset = c.warnings.filter { $0.contains("TIDINGS_TEST_UNSET_PASSWORD") }
        XCTAssertEqual(unset.count, 3, "\(c.warnings)")
        for (k, w) in unset.enumerated() {
            XCTAssertTrue(w.contains("plugins.d/s\(pad3(100 * k + 7)).toml:4: source \"s\(pad3(100 * k + 7))\""), w)
        }
    }

    func testAPluginFileThatIsASymbolicLinkIsReadAndAnEditIsSeen() throws {
        let dir = try scratchDirectory()
        try write("", to: "\(dir)/tidings.toml")
        try FileManager.default.createDirectory(atPath: "\(dir)/plugins.d", withIntermediateDirectories: true)
        try write("provider = \"http-json\"\nurl = \"http://127.0.0.1:9/a\"\ninterval = \"1m\"\n", to: "\(dir)/real.toml", mode: 0o600)
        XCTAssertEqual(symlink("\(dir)/real.toml", "\(dir)/plugins.d/linked.toml"), 0)
        try write("provider = \"http-json\"\nurl = \"http://127.0.0.1:9/b\"\ninterval = \"2m\"\n", to: "\(dir)/plugins.d/plain.toml", mode: 0o600)
        var c = try testLoader.load(file: "\(dir)/tidings.toml")
        XCTAssertEqual(c.sources.map(\.name), ["linked", "plain"])
        XCTAssertEqual(c.sources.map(\.settings.interval), [60, 120])
        // An edit of the same size is seen by the next load (SIGHUP's reload loads again).
        try write("provider = \"http-json\"\nurl = \"http://127.0.0.1:9/b\"\ninterval = \"5m\"\n", to: "\(dir)/plugins.d/plain.toml", mode: 0o600)
        c = try testLoader.load(file: "\(dir)/tidings.toml")
        XCTAssertEqual(c.sources.map(\.settings.interval), [60, 300])
    }

    func testRouteMatchNamingNoConfiguredSourceOrProviderIsAnError() throws {
        let errors = try configErrors(
            """
            [sinks.out]
            type = "stdout"
            [[routes]]
            match = { source = ["api", "apl"] }
            sinks = ["out"]
            [[routes]]
            match = { provider = "http_json", source = "probe" }
            sinks = ["out"]
            \(jsonSource)
            """, plugins: ["probe": ("#!/bin/sh\n", 0o700)])
        let text = errors.map(\.description).joined(separator: "\n")
        XCTAssertEqual(errors.map(\.line), [7, 4], text)
        XCTAssertTrue(text.contains(":4: route #1: match names no configured source 'apl' (configured: api, probe)"), text)
        XCTAssertTrue(text.contains(":7: route #2: match names no provider 'http_json'"), text)
    }

    func testAConfigWithoutSinksIsLoadedWithAWarning() throws {
        let c = try loadConfig(jsonSource)
        XCTAssertEqual(c.sources.count, 1)
        XCTAssertTrue(c.warnings.contains { $0.contains("no sinks configured") }, "\(c.warnings)")
        let withSink = try loadConfig("[sinks.out]\ntype = \"stdout\"\n" + jsonSource)
        XCTAssertEqual(withSink.warnings, [])
    }

    func testLenientSecretsAreWarningsAndPlaceholders() throws {
        let text = """
            [sinks.hook]
            type = "webhook"
            url = "http://127.0.0.1:9/"
            secret_file = "/nonexistent/hook.secret"
            [sources.sd]
            provider = "sportdate"
            base_url = "http://127.0.0.1:9"
            email = "me@example.com"
            password_env = "TIDINGS_TEST_UNSET_PASSWORD"
            """
        let strict = try configErrors(text)
        XCTAssertEqual(strict.map(\.line), [4, 9], strict.map(\.description).joined(separator: "\n"))

        let c = try loadConfig(text, secrets: .lenient)
        XCTAssertEqual(c.sources.map(\.name), ["sd"])
        XCTAssertEqual(c.sinks.map(\.name), ["hook"])
        XCTAssertEqual(c.warnings.count, 2, "\(c.warnings)")
        XCTAssertTrue(c.warnings[0].contains("tidings.toml:4: sink \"hook\": cannot read secret file /nonexistent/hook.secret"), c.warnings[0])
        XCTAssertTrue(c.warnings[1].contains("tidings.toml:9: source \"sd\": environment variable TIDINGS_TEST_UNSET_PASSWORD"), c.warnings[1])
        XCTAssertTrue(c.warnings.allSatisfy { $0.hasSuffix("(ignored: this command only reads the state)") })

        // Lenient is only about secrets: other errors still refuse the config.
        XCTAssertThrowsError(try loadConfig(text + "\ncolour = 1\n", secrets: .lenient))
    }

    func testLocateFollowsTheDocumentedOrder() throws {
        let dir = try scratchDirectory()
        XCTAssertEqual(ConfigLoader.locate(explicit: "/x/y.toml", environment: ["TIDINGS_CONFIG": "/a.toml"]), "/x/y.toml")
        XCTAssertEqual(ConfigLoader.locate(explicit: nil, environment: ["TIDINGS_CONFIG": "/a.toml"]), "/a.toml")
        try write("", to: "\(dir)/tidings/tidings.toml")
        XCTAssertEqual(ConfigLoader.locate(explicit: nil, environment: ["XDG_CONFIG_HOME": dir, "HOME": "/nonexistent"]), "\(dir)/tidings/tidings.toml")
        XCTAssertEqual(ConfigLoader.locate(explicit: nil, environment: ["HOME": "/nonexistent"]), "/etc/tidings/tidings.toml")
    }

    // MARK: header tables (sources and sinks alike)

    func testHeaderValuesMayBeSecretsOnSinksAndFromSystemdCredentials() throws {
        let dir = try scratchDirectory()
        try write("Bearer cred-tok-9\n", to: "\(dir)/creds/hook-auth")
        setenv("CREDENTIALS_DIRECTORY", "\(dir)/creds", 1)
        defer { unsetenv("CREDENTIALS_DIRECTORY") }
        let c = try loadConfig(
            """
            [sinks.hook]
            type = "webhook"
            url = "http://127.0.0.1:9/hook"
            headers = { Authorization_credential = "hook-auth", X-Team = "ops" }
            [sources.a]
            provider = "http-json"
            url = "http://127.0.0.1:9/"
            headers = { X-Api-Key_credential = "hook-auth" }
            """)
        let p = try XCTUnwrap(c.sources[0].instance as? HTTPJSONProvider)
        XCTAssertEqual(p.headers.pairs.map(\.0), ["X-Api-Key"])
        XCTAssertTrue(p.headers.carriesCredentials)
        XCTAssertEqual(Redactor.shared.scrub("echo: cred-tok-9"), "echo: ‹redacted›", "the token part of a header secret")

        unsetenv("CREDENTIALS_DIRECTORY")

        let errors = try configErrors(
            """
            [sources.a]
            provider = "http-json"
            url = "http://127.0.0.1:9/"
            headers = { Authorization_credential = "absent" }
            """)
        XCTAssertEqual(errors.map(\.line), [4])
        XCTAssertTrue(errors[0].message.contains("CREDENTIALS_DIRECTORY") && errors[0].message.contains("not set"), errors[0].message)
        setenv("CREDENTIALS_DIRECTORY", "\(dir)/creds", 1)
        let missing = try configErrors(
            """
            [sources.a]
            provider = "alertmanager"
            base_url = "http://127.0.0.1:9/"
            bearer_token_credential = "absent"
            """)
        XCTAssertEqual(missing.map(\.line), [4])
        XCTAssertTrue(missing[0].message.contains("cannot read credential absent (\(dir)/creds/absent)"), missing[0].message)
    }

    func testCredentialLikeInlineHeadersAreSecretsOthersAreNot() throws {
        let readable = try configErrors(
            """
            [sinks.hook]
            type = "webhook"
            url = "http://127.0.0.1:9/hook"
            headers = { X-Team = "ops", X-Session-Id = "abcd-1234" }
            """, mode: 0o644)
        XCTAssertEqual(readable.map(\.line), [4])
        XCTAssertTrue(readable[0].message.contains("inline secret 'X-Session-Id'"), readable[0].message)
        let plain = try loadConfig(
            """
            [sources.a]
            provider = "http-json"
            url = "http://127.0.0.1:9/"
            headers = { Accept = "application/json", X-Team = "ops" }
            """)
        XCTAssertFalse(try XCTUnwrap(plain.sources[0].instance as? HTTPJSONProvider).headers.carriesCredentials)
        for name in ["Authorization", "Proxy-Authorization", "Cookie", "X-Auth-Token", "X-API-KEY", "X-Hub-Signature"] {
            XCTAssertTrue(HeaderTable.isCredentialLike(name), name)
        }
        XCTAssertFalse(HeaderTable.isCredentialLike("Accept"))
    }

    func testHeaderNamesAndValuesCannotAddHeaders() throws {
        let dir = try scratchDirectory()
        try write("tok\nX-Injected: 1\n", to: "\(dir)/tok")
        let errors = try configErrors(
            """
            [sources.a]
            provider = "http-json"
            url = "http://127.0.0.1:9/"
            headers = { "X-A: b" = "c" }
            [sources.b]
            provider = "http-json"
            url = "http://127.0.0.1:9/"
            headers = { Authorization_file = "\(dir)/tok" }
            [sources.c]
            provider = "http-json"
            url = "http://127.0.0.1:9/"
            headers = { Authorization = "x", Authorization_env = "HOME" }
            """)
        XCTAssertEqual(errors.map(\.line), [4, 8, 12], errors.map(\.description).joined(separator: "\n"))
        XCTAssertTrue(errors[0].message.contains("not a valid HTTP header name"), errors[0].message)
        XCTAssertTrue(errors[1].message.contains("line break"), errors[1].message)
        XCTAssertTrue(errors[2].message.contains("set only one of"), errors[2].message)
    }
}
