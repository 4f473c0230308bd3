import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsPluginAPI

/// The cache of parsed plugin files (issue 33): an entry serves its file by the file's status
/// only when not racy, else by the bytes read, so never stale; a cache file that is corrupt, of
/// another version, not ours or writable by others is ignored.
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
        old.keep("a.toml", try XCTUnwrap(old.table(bytes, name: "a.toml", status: nil, file: "\(dir)/plugins.d/a.toml").offer))
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

    // MARK: served by status (one fstatat), never stale

    /// plugins.d read through a cache whose clock says `now` (nanoseconds since the epoch, set
    /// from the files' own times: these tests depend on no clock): each plugin's table as text,
    /// how the cache served them, and the errors.
    func scan(_ dir: String, now: Int64) throws -> (tables: [String: String], counts: ParsedConfigCache.Counts, errors: [String]) {
        let cache = ParsedConfigCache(path: try cachePath(dir), now: now)
        var tables: [String: String] = [:]
        var errors: [String] = []
        do {
            try testLoader.scanPlugins(
                "\(dir)/plugins.d", cache: cache, explicit: nil, prepare: { _, _, _ in true }, cacheable: { $0 },
                each: { name, table, _, _ in tables[name] = self.dump(table) })
        } catch let e as ConfigErrors {
            errors = e.errors.map(\.description)
        }
        cache.save()
        return (tables, cache.counts, errors)
    }

    /// The cache file's body is streamed in parts, its checksum taken as it goes (issue 33: built
    /// whole it was 38 MB at 100,000 entries): flushed every few bytes (words split between
    /// writes, a tail of fewer than 8), it is the file written in one part, and reads back whole.
    func testACacheStreamedInPartsIsTheCacheWrittenWhole() throws {
        var plugins: [String: String] = [:]
        for i in 0..<40 { plugins["p\(i).toml"] = plugin("\(i + 1)m", extra: String(repeating: "#", count: i)) }
        let (dir, _) = try setUpConfig(plugins)
        let now = try aMinuteAfter(plugins.keys.map { "\(dir)/plugins.d/\($0)" })
        func written(flushingEvery chunk: Int?) throws -> [UInt8] {
            unlink(try cachePath(dir))
            let cache = ParsedConfigCache(path: try cachePath(dir), now: now)
            try testLoader.scanPlugins(
                "\(dir)/plugins.d", cache: cache, explicit: nil, prepare: { _, _, _ in true }, cacheable: { $0 }, each: { _, _, _, _ in })
            if let chunk { cache.save(flushingEvery: chunk) } else { cache.save() }
            return Array(try XCTUnwrap(FileManager.default.contents(atPath: try cachePath(dir))))
        }
        let whole = try written(flushingEvery: nil)
        XCTAssertNotEqual(whole.count % 8, (ParsedConfigCache.magic.count + 12) % 8, "the body ends in a tail")
        for chunk in [1, 5, 13, 64] { XCTAssertEqual(try written(flushingEvery: chunk), whole, "flushed every \(chunk) bytes") }
        XCTAssertEqual(ParsedConfigCache(path: try cachePath(dir)).stored.count, 40)
        XCTAssertEqual(try scan(dir, now: now + 1).counts, .init(byStatus: 40))
    }

    /// The checksum taken in parts (whole words, then the tail) is the checksum of the whole.
    func testTheChecksumTakenInPartsIsTheWholeOnes() {
        let bytes = (0..<203).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        for words in stride(from: 0, through: bytes.count & ~7, by: 8) {
            bytes.withUnsafeBytes { raw in
                var c = ParsedConfigCache.Checksum(count: raw.count)
                c.words(UnsafeRawBufferPointer(rebasing: raw[0..<words]))
                c.words(UnsafeRawBufferPointer(rebasing: raw[words..<(raw.count & ~7)]))
                XCTAssertEqual(c.finish(tail: UnsafeRawBufferPointer(rebasing: raw[(raw.count & ~7)...])), ParsedConfigCache.checksum(bytes[...]))
            }
        }
        XCTAssertNotEqual(ParsedConfigCache.checksum(bytes.dropLast()[...]), ParsedConfigCache.checksum(bytes[...]))
    }

    /// Writes `text` into the file in place (same inode: `write(_:to:)` renames a new file over it).
    func overwrite(_ path: String, _ text: String) throws {
        let fd = open(path, O_WRONLY | O_TRUNC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let bytes = Array(text.utf8)
        XCTAssertEqual(bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }, bytes.count)
    }

    func status(_ path: String) throws -> stat {
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        return st
    }

    func nanoseconds(_ t: timespec) -> Int64 { Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec) }

    /// A clock a minute after the files' last modification or change: their entries are not racy.
    func aMinuteAfter(_ paths: [String]) throws -> Int64 {
        try paths.map { p in
            let st = try status(p)
            return max(nanoseconds(st.st_mtim), nanoseconds(st.st_ctim))
        }.max()! + 60_000_000_000
    }

    func testAnEntryIsReverifiedByContentWhileRacyThenServedByStatus() throws {
        let (dir, _) = try setUpConfig(["a.toml": plugin("1m"), "b.toml": plugin("2m")])
        let files = ["\(dir)/plugins.d/a.toml", "\(dir)/plugins.d/b.toml"]
        let later = try aMinuteAfter(files)
        let changed = nanoseconds(try status(files[0]).st_ctim)
        // Recorded when the file had just changed: racy.
        let first = try scan(dir, now: changed)
        XCTAssertEqual(first.counts, .init(parsed: 2))
        XCTAssertEqual(first.errors, [])
        XCTAssertEqual(first.tables.count, 2)
        var stored = try XCTUnwrap(ParsedConfigCache(path: try cachePath(dir)).stored["a.toml"])
        XCTAssertTrue(stored.racy)
        // Still racy: checked by content, and the cache is not rewritten for it.
        XCTAssertEqual(try scan(dir, now: changed + 1_000_000_000).counts, .init(byContent: 2))
        XCTAssertEqual(try XCTUnwrap(ParsedConfigCache(path: try cachePath(dir)).stored["a.toml"]).verifiedAt, changed)
        // No longer racy once checked again: re-dated and rewritten.
        let second = try scan(dir, now: later)
        XCTAssertEqual(second.counts, .init(byContent: 2))
        XCTAssertEqual(second.tables, first.tables)
        stored = try XCTUnwrap(ParsedConfigCache(path: try cachePath(dir)).stored["a.toml"])
        XCTAssertEqual(stored.verifiedAt, later)
        XCTAssertFalse(stored.racy)
        // Then served by status alone, and the cache is left as it is.
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: try cachePath(dir)))
        let third = try scan(dir, now: later + 60_000_000_000)
        XCTAssertEqual(third.counts, .init(byStatus: 2))
        XCTAssertEqual(third.tables, first.tables)
        XCTAssertEqual(try XCTUnwrap(FileManager.default.contents(atPath: try cachePath(dir))), bytes)
    }

    /// Two writes in one timestamp tick to the same size leave the same status over other bytes:
    /// the entry recorded between them is racy, so the second write is seen. (Forged: the cache
    /// holds the first bytes' table under the file's status after the second write.)
    func testASameSizeWriteInTheSameTickIsSeenBecauseTheEntryIsRacy() throws {
        let (dir, _) = try setUpConfig(["a.toml": plugin("1m")])
        let file = "\(dir)/plugins.d/a.toml"
        let before = Array(try XCTUnwrap(FileManager.default.contents(atPath: file)))
        try overwrite(file, plugin("2m"))
        let st = try status(file)
        XCTAssertEqual(Int(st.st_size), before.count)
        let forged = ParsedConfigCache(path: try cachePath(dir), now: nanoseconds(st.st_ctim))
        forged.keep("a.toml", try XCTUnwrap(forged.table(before, name: "a.toml", status: st, file: file).offer))
        forged.save()
        let stored = try XCTUnwrap(ParsedConfigCache(path: try cachePath(dir)).stored["a.toml"])
        XCTAssertEqual(stored.identity, ParsedConfigCache.Identity(st))
        XCTAssertTrue(stored.racy)
        let after = try scan(dir, now: try aMinuteAfter([file]))
        XCTAssertEqual(after.counts, .init(parsed: 1))
        XCTAssertTrue(try XCTUnwrap(after.tables["a"]).contains("interval=@3string(\"2m\")"), after.tables["a"]!)
    }

    /// An entry that is not racy: a later write to the same size, its modification time set back,
    /// moved the change time, which no one can set back: seen.
    func testASameSizeWriteWithItsModificationTimeSetBackIsSeen() throws {
        let (dir, _) = try setUpConfig(["a.toml": plugin("1m")])
        let file = "\(dir)/plugins.d/a.toml"
        let later = try aMinuteAfter([file])
        XCTAssertEqual(try scan(dir, now: later).counts, .init(parsed: 1))
        XCTAssertEqual(try scan(dir, now: later).counts, .init(byStatus: 1))
        let st = try status(file)
        try overwrite(file, plugin("2m"))
        // Past the tick of the first write (ctime moves on a chmod too), then the times set back.
        while nanoseconds(try status(file).st_ctim) == nanoseconds(st.st_ctim) { XCTAssertEqual(chmod(file, 0o600), 0) }
        let times = [st.st_atim, st.st_mtim]
        XCTAssertEqual(times.withUnsafeBufferPointer { utimensat(AT_FDCWD, file, $0.baseAddress, 0) }, 0)
        let now = try status(file)
        XCTAssertEqual(now.st_size, st.st_size)
        XCTAssertEqual(now.st_ino, st.st_ino)
        XCTAssertEqual(nanoseconds(now.st_mtim), nanoseconds(st.st_mtim))
        let after = try scan(dir, now: later)
        XCTAssertEqual(after.counts, .init(parsed: 1))
        XCTAssertTrue(try XCTUnwrap(after.tables["a"]).contains("interval=@3string(\"2m\")"), after.tables["a"]!)
    }

    func testAFileReplacedByRenameIsSeen() throws {
        let (dir, _) = try setUpConfig(["a.toml": plugin("1m")])
        let file = "\(dir)/plugins.d/a.toml"
        let later = try aMinuteAfter([file])
        _ = try scan(dir, now: later)
        XCTAssertEqual(try scan(dir, now: later).counts, .init(byStatus: 1))
        let st = try status(file)
        try write(plugin("2m"), to: "\(dir)/a.toml.new")
        let times = [st.st_atim, st.st_mtim]
        XCTAssertEqual(times.withUnsafeBufferPointer { utimensat(AT_FDCWD, "\(dir)/a.toml.new", $0.baseAddress, 0) }, 0)
        XCTAssertEqual(rename("\(dir)/a.toml.new", file), 0)
        let after = try scan(dir, now: later)
        XCTAssertEqual(after.counts, .init(parsed: 1))
        XCTAssertTrue(try XCTUnwrap(after.tables["a"]).contains("interval=@3string(\"2m\")"), after.tables["a"]!)
    }

    /// The trust check is made on every load from the status taken then, served by status or not.
    func testAGroupWritableFileIsRefusedWhenServedByStatus() throws {
        let (dir, _) = try setUpConfig(["a.toml": plugin("1m")])
        let file = "\(dir)/plugins.d/a.toml"
        XCTAssertEqual(try scan(dir, now: try aMinuteAfter([file])).errors, [])
        XCTAssertEqual(chmod(file, 0o620), 0)
        let later = try aMinuteAfter([file])
        for served in [ParsedConfigCache.Counts(byContent: 1), .init(byStatus: 1)] {
            let r = try scan(dir, now: later)
            XCTAssertEqual(r.counts, served)
            XCTAssertEqual(r.errors.count, 1)
            XCTAssertTrue(r.errors.first?.contains("a.toml: plugin config is writable by group or others (mode 620)") == true, "\(r.errors)")
        }
        XCTAssertEqual(chmod(file, 0o600), 0)
        XCTAssertEqual(try scan(dir, now: try aMinuteAfter([file])).errors, [])
    }

    /// A file whose status changed but not its bytes (`touch`): checked by content, re-dated
    /// under its new status, then served by status again.
    func testATouchedFileIsCheckedByContentThenServedByStatusAgain() throws {
        let (dir, _) = try setUpConfig(["a.toml": plugin("1m")])
        let file = "\(dir)/plugins.d/a.toml"
        _ = try scan(dir, now: try aMinuteAfter([file]))
        XCTAssertEqual(try scan(dir, now: try aMinuteAfter([file])).counts, .init(byStatus: 1))
        let st = try status(file)
        var times = [st.st_atim, st.st_mtim]
        times[1].tv_sec += 1
        XCTAssertEqual(times.withUnsafeBufferPointer { utimensat(AT_FDCWD, file, $0.baseAddress, 0) }, 0)
        // While racy: checked by content, and the entry of its old status stands.
        let old = try XCTUnwrap(ParsedConfigCache(path: try cachePath(dir)).stored["a.toml"]).identity
        XCTAssertEqual(try scan(dir, now: nanoseconds(try status(file).st_ctim)).counts, .init(byContent: 1))
        XCTAssertEqual(try XCTUnwrap(ParsedConfigCache(path: try cachePath(dir)).stored["a.toml"]).identity, old)
        let later = try aMinuteAfter([file])
        XCTAssertEqual(try scan(dir, now: later).counts, .init(byContent: 1))
        XCTAssertEqual(try XCTUnwrap(ParsedConfigCache(path: try cachePath(dir)).stored["a.toml"]).identity, ParsedConfigCache.Identity(try status(file)))
        XCTAssertEqual(try scan(dir, now: later).counts, .init(byStatus: 1))
    }
}
