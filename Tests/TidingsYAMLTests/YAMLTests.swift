import XCTest

@testable import TidingsYAML

final class YAMLTests: XCTestCase {
    func read(_ s: String, _ limits: YAML.Limits = YAML.Limits()) throws -> [YAMLNode] {
        try YAML.documents(Array(s.utf8), limits: limits)
    }

    /// urlwatch's urls.yaml: several documents, plain and quoted scalars, lines kept.
    func testDocumentsMappingsSequencesAndLines() throws {
        let docs = try read("""
            name: "Jobs"
            url: https://example.org/jobs
            max_tries: 3
            ignore_cached: yes
            ---
            # a comment
            command: "ls -l"
            filter:
              - css: {selector: "ul > li", exclude: ".ad"}
              - html2text
            """)
        XCTAssertEqual(docs.count, 2)
        XCTAssertEqual(docs[0]["name"]?.string, "Jobs")
        XCTAssertEqual(docs[0]["max_tries"]?.int, 3)
        XCTAssertEqual(docs[0]["ignore_cached"]?.bool, true)
        XCTAssertEqual(docs[0]["url"]?.line, 2)
        XCTAssertEqual(docs[1].line, 7)
        let filters = try XCTUnwrap(docs[1]["filter"]?.sequence)
        XCTAssertEqual(filters.count, 2)
        XCTAssertEqual(filters[0]["css"]?["selector"]?.string, "ul > li")
        XCTAssertEqual(filters[0]["css"]?["exclude"]?.string, ".ad")
        XCTAssertEqual(filters[1].string, "html2text")
        XCTAssertEqual(filters[1].line, 10)
        XCTAssertNil(YAMLNode(.scalar("3", plain: false), line: 1).int, "a quoted 3 is a string")
        XCTAssertEqual(try read("a: ~\nb:\n")[0]["b"]?.isNull, true)
        XCTAssertEqual(try read("").count, 0)
    }

    func testAnchorsAndAliasesAreResolved() throws {
        let doc = try read("base: &h {Accept: text/html}\njob: {headers: *h}\n")[0]
        XCTAssertEqual(doc["job"]?["headers"]?["Accept"]?.string, "text/html")
        XCTAssertEqual(doc["job"]?["headers"]?.line, 2)
    }

    /// Merge keys as PyYAML reads them (urlwatch users share headers this way); a key given
    /// twice counts with its last value.
    func testMergeKeysAndRepeatedKeys() throws {
        let docs = try read("""
            defaults: &base {headers: {Accept: text/html}, max_tries: 2}
            job:
              url: https://example.org/a
              max_tries: 5
              <<: *base
            ---
            <<: [{a: 1}, {a: 2, b: 3}]
            a: 0
            a: 9
            """)
        let job = try XCTUnwrap(docs[0]["job"])
        XCTAssertEqual(job["max_tries"]?.int, 5)
        XCTAssertEqual(job["headers"]?["Accept"]?.string, "text/html")
        XCTAssertEqual(job.mapping?.compactMap(\.key.string), ["url", "max_tries", "headers"])
        XCTAssertThrowsError(try read("a: &x 1\n---\nb: *x\n"), "anchors belong to their document")
        let d2 = docs[1]
        XCTAssertEqual(d2["a"]?.int, 9)
        XCTAssertEqual(d2["b"]?.int, 3)
        XCTAssertThrowsError(try read("<<: 3\n"))
    }

    /// Billion laughs: nine aliases per level, nine levels. Refused once the expansion passes
    /// the bound, with the line; not built (the test would run out of memory).
    func testAliasBombIsRefused() {
        var s = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
        for i in 1..<names.count {
            let p = names[i - 1]
            s += "\(names[i]): &\(names[i]) [*\(p),*\(p),*\(p),*\(p),*\(p),*\(p),*\(p),*\(p),*\(p)]\n"
        }
        XCTAssertThrowsError(try read(s)) { e in
            let e = e as! YAMLError
            XCTAssertTrue(e.message.contains("more than 1000000 nodes"), e.description)
            XCTAssertEqual(e.line, 7)
        }
        // Below the bound, the same shape is read.
        var small = YAML.Limits()
        small.maxNodes = 100_000
        XCTAssertNoThrow(try read("a: &a [1,2,3]\nb: [*a,*a,*a]\n", small))
    }

    func testDepthIsBounded() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        XCTAssertThrowsError(try read(deep)) { e in
            XCTAssertTrue((e as! YAMLError).message.contains("nested deeper than 64"))
        }
        XCTAssertNoThrow(try read(String(repeating: "[", count: 60) + String(repeating: "]", count: 60)))
    }

    func testSyntaxErrorsNameTheLine() {
        XCTAssertThrowsError(try read("a: 1\nb: [1, 2\nc: 3\n")) { e in
            let e = e as! YAMLError
            XCTAssertGreaterThanOrEqual(e.line, 3, e.description)
        }
        XCTAssertThrowsError(try read("a: *nowhere\n")) { e in
            XCTAssertEqual((e as! YAMLError).line, 1)
        }
    }
}
