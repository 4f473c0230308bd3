import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsPluginAPI

/// `tidings add WHAT` from the words alone (what needs a server is in Tests/e2e/test_add.py).
final class AddressLookupTests: XCTestCase {
    private func look(_ words: [String], _ edit: (inout AddRequest) -> Void = { _ in }) async throws -> Lookup {
        var r = AddRequest(words: words)
        edit(&r)
        return try await AddressLookup(http: testHTTP).look(r, knownProviders: ["feed", "page", "github", "certificate", "imap", "exec", "sportdate"])
    }

    private func failure(_ words: [String]) async -> LookupFailure? {
        do {
            _ = try await look(words)
            return nil
        } catch let e as LookupFailure {
            return e
        } catch {
            return nil
        }
    }

    func testGitHubRepositoriesInEveryForm() async throws {
        for what in ["github.com/octo/hello", "https://github.com/octo/hello", "http://www.github.com/octo/hello.git", "https://github.com/octo/hello/releases"] {
            let d = try await look([what]).draft
            XCTAssertEqual(d.provider, "github", what)
            XCTAssertEqual(d.options.first { $0.key == "repo" }?.value, .string("octo/hello"), what)
            XCTAssertEqual(d.watchedURL, "https://github.com/octo/hello")
        }
        let named = try await look(["github", "octo/hello"]).draft.name
        XCTAssertEqual(named, "octo-hello")
        XCTAssertNil(AddressLookup.githubRepository("github.com/octo"))
        XCTAssertNil(AddressLookup.githubRepository("github.com/-bad_/x"))
        XCTAssertNil(AddressLookup.githubRepository("gitlab.com/octo/hello"))
    }

    func testCertificatesAndMailboxes() async throws {
        for what in ["127.0.0.1:8443", "localhost", "mail.example.org", "smtp://127.0.0.1", "imap://127.0.0.1:143", "imaps://127.0.0.1"] {
            let d = try await look([what]).draft
            XCTAssertEqual(d.provider, "certificate", what)
            XCTAssertEqual(d.options.first?.value, .strings([what]))
        }
        let m = try await look(["imaps://me%40home:pa%24%24word@127.0.0.1:9993/Lists"]).draft
        XCTAssertEqual(m.provider, "imap")
        XCTAssertEqual(m.options.first { $0.key == "url" }?.value, .string("imaps://127.0.0.1:9993/Lists"))
        XCTAssertEqual(m.options.first { $0.key == "username" }?.value, .string("me@home"))
        XCTAssertEqual(m.secrets, [SecretDraft(option: "password", value: "pa$$word")])
        XCTAssertFalse(SourceFileWriter.render(m, name: "m").contains("pa$$word"))
        let inbox = try await look(["imaps://me@127.0.0.1"]).draft
        XCTAssertEqual(inbox.options.first?.value, .string("imaps://127.0.0.1/INBOX"))
    }

    func testExecTakesTheCommandAndOtherProvidersAreWrittenByHand() async throws {
        let d = try await look(["exec"]) { $0.command = ["/usr/lib/nagios/plugins/check_disk", "-w", "10%"] }.draft
        XCTAssertEqual(d.provider, "exec")
        XCTAssertEqual(d.name, "check_disk")
        XCTAssertEqual(d.options.first?.value, .strings(["/usr/lib/nagios/plugins/check_disk", "-w", "10%"]))
        XCTAssertNil(d.watchedURL)
        guard case .usage(let m)? = await failure(["sportdate"]) else { return XCTFail() }
        XCTAssertTrue(m.contains("written by hand"), m)
        guard case .usage? = await failure(["exec"]) else { return XCTFail("exec without a command") }
        guard case .usage? = await failure(["what is this"]) else { return XCTFail() }
        guard case .usage? = await failure(["ftp://127.0.0.1/x"]) else { return XCTFail() }
        guard case .usage? = await failure(["127.0.0.1:8080", "extra"]) else { return XCTFail() }
        guard case .usage? = await failure([]) else { return XCTFail() }
    }

    func testTheAddressARequestNamesIsKnownBeforeAnythingIsFetched() {
        XCTAssertEqual(AddressLookup.watchedURL(of: AddRequest(words: ["https://127.0.0.1/feed"])), "https://127.0.0.1/feed")
        XCTAssertEqual(AddressLookup.watchedURL(of: AddRequest(words: ["feed", "http://127.0.0.1/x"])), "http://127.0.0.1/x")
        XCTAssertEqual(AddressLookup.watchedURL(of: AddRequest(words: ["github", "octo/hello"])), "https://github.com/octo/hello")
        XCTAssertEqual(AddressLookup.watchedURL(of: AddRequest(words: ["example.org/blog"])), "https://example.org/blog")
        XCTAssertNil(AddressLookup.watchedURL(of: AddRequest(words: ["127.0.0.1:443"])))
    }
}
