import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsPluginAPI

/// The cache of parsed plugin files (issue 33): keyed by the bytes read, so never stale; a cache
/// file that is corrupt, of another version, not ours or writable by others is ignored.
final class ParsedConfigCacheTests: XCTestCase {
    /// A main config and plugins.d in a scratch folder, and a loader whose cache is in it.
    func setUpConfig(_ plugins: [String: String]) throws -> (dir: String, loader: ConfigLoader) {
        let dir = try scratchDirectory()
        try write("", to: "\(dir)/tidings.toml")
        try FileManager.default.createDirectory(atPath: "\(dir)/plugins.d", withIntermediateDirectories: true)
        for (name, text) in plugins { try write(text, to: "\(dir)/plugins.d/\(name)") }
        var loader = testLoader
        loader.cacheEnvironment = ["XDG_CACHE_HOME": "\(dir)/cache"]
        return (dir, loader)
    }

    func cachePath(_ dir: String) throws -> String {
        try XCTUnwrap(ParsedConfigCache.location(pluginsDir: "\(dir)/plugins.d", stateDir: nil, environment: ["XDG_CACHE_HOME": "\(dir)/cache"]))
    }

    func plugin(_ interval: String, extra: String = "") -> String {
        "provider = \"http-json\"\nurl = \"http://127.0.0.1:9/a\"\ninterval = \"\(interval)\"\n\(extra)"
    }

    func testAnEditWithinTheSameSecondToTheSameSizeIsSeen() throws {
        let (dir, loader) = try setUpConfig(["a.toml": plugin("1m")])
        let file = "\(dir)/plugins.d/a.toml"
        XCTAssertEqual(try loader.load(file: "\(dir)/tidings.toml").sources.map(\.settings.interval), [60])
        let cache = try cachePath(dir)
        var st = stat()
        XCTAssertEqual(lstat(cache, &st), 0, "the cache was written")
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        XCTAssertEqual(ParsedConfigCache(path: cache).stored.count, 1)
        XCTAssertEqual(stat(file, &st), 0)
        let times = [st.st_atim, st.st_mtim]

        // Same size, same mtime (as an edit within the timestamp's granularity would leave it).
        try write(plugin("2m"), to: file)
        XCTAssertEqual(times.withUnsafeBufferPointer { utimensat(AT_FDCWD, file, $0.baseAddress, 0) }, 0)
        var after = stat()
        XCTAssertEqual(stat(file, &after), 0)
        XCTAssertEqual(after.st_size, st.st_size)
        XCTAssertEqual(after.st_mtim.tv_sec, st.st_mtim.tv_sec)
        XCTAssertEqual(try loader.load(file: "\(dir)/tidings.toml").sources.map(\.settings.interval), [120])
        // Only the entries used are written back: one per plugin file.
        XCTAssertEqual(ParsedConfigCache(path: cache).stored.count, 1)
    }

    func testErrorsOfACachedFileKeepTheirLines() throws {
        let (dir, loader) = try setUpConfig(["a.toml": plugin("1m", extra: "bogus = 1\n")])
        func errors() throws -> [String] {
            do {
                _ = try loader.load(file: "\(dir)/tidings.toml")
                return []
            } catch let e as ConfigErrors {
                return e.errors.map(\.description)
            }
        }
        let first = try errors()
        XCTAssertEqual(first.count, 1)
        XCTAssertTrue(first[0].contains("plugins.d/a.toml:4: source \"a\": unknown key 'bogus'"), first[0])
        XCTAssertEqual(ParsedConfigCache(path: try cachePath(dir)).stored.count, 0, "a table that built no source is not kept")
        XCTAssertEqual(try errors(), first)
    }

    /// A secret written in a plugin file (a credential header, a password in a URL) is never
    /// copied into the cache, and an entry holding one in an older cache file is dropped from it;
    /// a file that names its secret's file is cached.
    func testASecretWrittenInAPluginFileIsNeverCopiedIntoTheCache() throws {
        let header = "sekrit-header-value-1"
        let password = "pa55word-in-url-2"
        let (dir, loader) = try setUpConfig([
            "a.toml": plugin("1m", extra: "headers = { Authorization = \"Bearer \(header)\" }\n"),
            "b.toml": "provider = \"http-json\"\nurl = \"http://user:\(password)@127.0.0.1:9/b\"\n",
            "c.toml": plugin("1m", extra: "headers = { Authorization_file = \"token\" }\n"),
            "d.toml": plugin("2m"),
        ])
        try write("Bearer from-a-file-3", to: "\(dir)/plugins.d/token")
        func cacheText() throws -> String {
            String(decoding: try XCTUnwrap(FileManager.default.contents(atPath: try cachePath(dir))), as: UTF8.self)
        }
        XCTAssertEqual(try loader.load(file: "\(dir)/tidings.toml").sources.count, 4)
        XCTAssertEqual(ParsedConfigCache(path: try cachePath(dir)).stored.count, 2, "c and d are cached")
        var text = try cacheText()
        XCTAssertFalse(text.contains(header), "the header's secret is not in the cache")
        XCTAssertFalse(text.contains(password), "the URL's password is not in the cache")
        XCTAssertTrue(text.contains("Authorization_file"), "c's table is")

        // A cache written before this rule, holding a.toml's table: the next load drops it.
        let old = ParsedConfigCache(path: try cachePath(dir))
        let bytes = Array(try XCTUnwrap(FileManager.default.contents(atPath: "\(dir)/plugins.d/a.toml")))
        old.keep(try XCTUnwrap(old.table(bytes, file: "\(dir)/plugins.d/a.toml").key))
        old.save()
        XCTAssertTrue(try cacheText().contains(header), "the old cache holds the secret")
        XCTAssertEqual(try loader.load(file: "\(dir)/tidings.toml").sources.count, 4)
        text = try cacheText()
        XCTAssertFalse(text.contains(header), "the next load dropped it")
        XCTAssertEqual(ParsedConfigCache(path: try cachePath(dir)).stored.count, 2)
    }

    func testACachedTableIsTheParsedTable() throws {
        let text = "a = 1\nb = [\"x\", 2.5, true]\n[t]\nc = { d = \"e\" }\n[[u]]\nf = 1\n[[u]]\nf = 2\n"
        let parsed = try ConfigTable.parse(text, file: "/p/x.toml")
        var w = ParsedConfigCache.Writer()
        w.table(parsed)
        var r = ParsedConfigCache.Reader(bytes: w.bytes)
        let back = try r.table(file: "/q/x.toml")
        XCTAssertTrue(r.atEnd)
        XCTAssertEqual(back.file, "/q/x.toml")
        XCTAssertEqual(dump(back), dump(parsed).replacing("/p/x.toml", with: "/q/x.toml"))
        // Every truncation is refused, not read as a smaller table.
        for n in 0..<w.bytes.count {
            var t = ParsedConfigCache.Reader(bytes: Array(w.bytes.prefix(n)))
            XCTAssertFalse((try? t.table(file: "/q/x.toml")) != nil && t.atEnd, "prefix \(n)")
        }
    }

    func dump(_ t: ConfigTable) -> String {
        func node(_ n: ConfigNode) -> String {
            let l = n.line.map(String.init) ?? "-"
            switch n.value {
            case .table(let s): return "@\(l){\(dump(s))}"
            case .array(let a): return "@\(l)[\(a.map(node).joined(separator: ","))]"
            default: return "@\(l)\(n.value)"
            }
        }
        return "\(t.file)|\(t.path)|\(t.line ?? -1)|" + t.keys.map { "\($0)=\(node(t[$0]!))" }.joined(separator: ";")
    }

    func testACacheFileThatIsCorruptOfAnotherVersionForeignOrWritableByOthersIsIgnored() throws {
        let (dir, loader) = try setUpConfig(["a.toml": plugin("1m"), "b.toml": plugin("2m")])
        _ = try loader.load(file: "\(dir)/tidings.toml")
        let cache = try cachePath(dir)
        let good = try Data(contentsOf: URL(fileURLWithPath: cache))
        XCTAssertEqual(ParsedConfigCache(path: cache).stored.count, 2)
        func with(_ bytes: Data, mode: mode_t = 0o600, owner: uid_t? = nil) throws -> Int {
            unlink(cache)
            XCTAssertTrue(FileManager.default.createFile(atPath: cache, contents: bytes))
            XCTAssertEqual(chmod(cache, mode), 0)
            if let owner { XCTAssertEqual(chown(cache, owner, owner), 0) }
            return ParsedConfigCache(path: cache).stored.count
        }
        XCTAssertEqual(try with(good), 2)
        var flipped = good
        flipped[flipped.count - 3] ^= 0x01
        XCTAssertEqual(try with(flipped), 0, "a corrupt cache is ignored")
        XCTAssertEqual(try with(good.prefix(good.count - 1)), 0, "a truncated cache is ignored")
        var other = good
        other[ParsedConfigCache.magic.count] &+= 1
        XCTAssertEqual(try with(other), 0, "a cache of another version is ignored")
        XCTAssertEqual(try with(good, mode: 0o620), 0, "a group-writable cache is ignored")
        XCTAssertEqual(try with(good, mode: 0o602), 0, "a cache writable by others is ignored")
        if geteuid() == 0 {
            XCTAssertEqual(try with(good, owner: 4242), 0, "a cache owned by another user is ignored")
        }
        // Loading over an ignored cache still works, and writes a good one again.
        _ = try with(flipped)
        XCTAssertEqual(try loader.load(file: "\(dir)/tidings.toml").sources.map(\.settings.interval), [60, 120])
        XCTAssertEqual(ParsedConfigCache(path: cache).stored.count, 2)
        // A cache that cannot be written is no error.
        unlink(cache)
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        XCTAssertEqual(try loader.load(file: "\(dir)/tidings.toml").sources.map(\.settings.interval), [60, 120])
    }
}
