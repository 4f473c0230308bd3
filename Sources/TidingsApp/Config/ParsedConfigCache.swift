import FoundationEssentials
import Glibc
import Synchronization
import TidingsCrypto
import TidingsPluginAPI

/// Parsed plugin files kept between runs (issue 33: parsing 10,000 `plugins.d` files was a
/// quarter of `config check`, `sources` and `status`).
///
/// Each entry is keyed by the SHA-256 of the bytes read, so it cannot be stale: a file edited in
/// the same second to the same size has other bytes, hence another key. Only the parse is
/// cached: every file is still opened, read and checked (``PluginTrust``) on every load, and
/// its table gets the file's current path. The cache file (0600, ours, written atomically by
/// rename) is ignored when it is not ours, is writable by others, is of another version or
/// fails its checksum; failing to write it is never an error. Only the entries this load kept
/// (``keep(_:)``) are written back, so it holds one entry per plugin file and no more, and none
/// for a file that holds a secret: the loader keeps only tables whose source was built and read
/// no inline secret (``OptionReader/readInlineSecret``), so a password written in a plugin file
/// is never copied into the cache.
package final class ParsedConfigCache: Sendable {
    /// Where the cache is, or nil for none.
    package let path: String?
    /// The cache file's bytes, and where in them each entry is: an entry is decoded when a file
    /// with its key is loaded, not before (reading the cache is on the load's critical path).
    let storage: [UInt8]
    let stored: [Key: Range<Int>]
    /// Entries read or parsed by this load (`offered`), and those the loader kept.
    private let state = Mutex<(offered: [Key: Entry], used: [Key: Entry], changed: Bool)>(([:], [:], false))

    /// An entry: where it is in ``storage``, or its bytes, just made.
    enum Entry {
        case stored(Range<Int>)
        case parsed([UInt8])
    }

    /// A SHA-256 as four words: hashed and compared as 4 words, not 32 bytes one at a time.
    package struct Key: Hashable, Comparable, Sendable {
        var a: UInt64, b: UInt64, c: UInt64, d: UInt64
        init(_ digest: [UInt8]) {
            func word(_ i: Int) -> UInt64 { (0..<8).reduce(0) { $0 << 8 | UInt64(digest[8 * i + $1]) } }
            (a, b, c, d) = (word(0), word(1), word(2), word(3))
        }
        var bytes: [UInt8] { [a, b, c, d].flatMap { w in (0..<8).map { UInt8(truncatingIfNeeded: w >> (56 - 8 * UInt64($0))) } } }
        package static func < (l: Key, r: Key) -> Bool { (l.a, l.b, l.c, l.d) < (r.a, r.b, r.c, r.d) }
    }

    static let magic: [UInt8] = Array("TIDINGS-CONFIG-CACHE".utf8)
    /// 2: a 64-bit checksum (``checksum(_:)``) in place of a SHA-256 of the body.
    static let version: UInt32 = 2

    /// A cache read from `path` (nil: no cache, everything is parsed).
    package init(path: String?) {
        self.path = path
        (storage, stored) = path.flatMap { Self.read($0) } ?? ([], [:])
    }

    /// The cache file for `pluginsDir`: in `stateDir` when the config names one, else in
    /// `$XDG_CACHE_HOME/tidings` (`~/.cache/tidings`); `$TIDINGS_CONFIG_CACHE=off` disables it.
    package static func location(
        pluginsDir: String, stateDir: String?, environment env: [String: String] = ProcessInfo.processInfo.environment
    ) -> String? {
        if env["TIDINGS_CONFIG_CACHE"] == "off" { return nil }
        let folder: String
        if let stateDir, !stateDir.isEmpty {
            folder = stateDir
        } else if let xdg = env["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
            folder = "\(xdg)/tidings"
        } else if let home = env["HOME"], home.hasPrefix("/") {
            folder = "\(home)/.cache/tidings"
        } else {
            return nil
        }
        return "\(folder)/config-cache-\(Fingerprint.of([pluginsDir])).bin"
    }

    /// The table of a file whose bytes are `bytes`, from the cache or parsed, and the key under
    /// which ``keep(_:)`` keeps it for the next load (nil: no cache). Parse errors are thrown as
    /// ``ConfigTable/parse(_:file:)`` throws them, and not kept.
    package func table(_ bytes: [UInt8], file: String) throws -> (table: ConfigTable, key: Key?) {
        guard path != nil else { return (try ConfigTable.parse(String(decoding: bytes, as: UTF8.self), file: file), nil) }
        let key = Key(SHA256.hash(bytes))
        if let range = stored[key] {
            var reader = Reader(bytes: storage, offset: range.lowerBound, end: range.upperBound)
            if let table = try? reader.table(file: file), reader.atEnd {
                state.withLock { $0.offered[key] = .stored(range) }
                return (table, key)
            }
        }
        let table = try ConfigTable.parse(String(decoding: bytes, as: UTF8.self), file: file)
        var w = Writer()
        w.table(table)
        state.withLock { $0.offered[key] = .parsed(w.bytes) }
        return (table, key)
    }

    /// Keeps the table ``table(_:file:)`` returned under `key` for the next load. A table not
    /// kept is not written (and an entry of the old file not kept is dropped from it).
    package func keep(_ key: Key) {
        state.withLock {
            guard let entry = $0.offered[key], $0.used[key] == nil else { return }
            $0.used[key] = entry
            if stored[key] == nil { $0.changed = true }
        }
    }

    /// Writes the entries used since ``init(path:)`` back, if they differ from those read.
    /// Failures are ignored: the cache only saves work.
    package func save() {
        guard let path else { return }
        let (used, changed) = state.withLock { ($0.used, $0.changed) }
        // Entries of the old file not kept by this load (a file gone, edited, or now holding a
        // secret) make it differ too: then `used` has fewer of them.
        guard changed || used.count != stored.count else { return }
        var body = Writer()
        body.u32(UInt32(used.count))
        for key in used.keys.sorted() {
            body.raw(key.bytes)
            switch used[key]! {
            case .stored(let range):
                body.u32(UInt32(range.count))
                body.bytes += storage[range]
            case .parsed(let bytes):
                body.blob(bytes)
            }
        }
        var out = Writer()
        out.raw(Self.magic)
        out.u32(Self.version)
        out.u64(Self.checksum(body.bytes[...]))
        out.raw(body.bytes)
        let folder = PathText.parent(path)
        _ = makeDirectories(folder, mode: 0o700)
        let temporary = "\(path).\(getpid()).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        var ok = fchmod(fd, 0o600) == 0
        var written = 0
        while ok && written < out.bytes.count {
            let n = out.bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { ok = false } else { written += n }
        }
        close(fd)
        if !ok || rename(temporary, path) != 0 { unlink(temporary) }
    }

    /// The entries of the cache file at `path`, or nil if it is missing, not a regular file
    /// owned by us, writable by group or others, of another version or corrupt.
    static func read(_ path: String) -> ([UInt8], [Key: Range<Int>])? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid(), st.st_mode & 0o022 == 0,
            let bytes = PluginTrust.readRegular(fd, size: Int(st.st_size))
        else { return nil }
        return decode(bytes)
    }

    /// The entries of a cache file's bytes (where each is in them), or nil if they are not a
    /// whole cache of this version.
    static func decode(_ bytes: [UInt8]) -> ([UInt8], [Key: Range<Int>])? {
        let head = magic.count + 4 + 8
        guard bytes.count >= head, bytes.starts(with: magic) else { return nil }
        var r = Reader(bytes: bytes)
        r.offset = magic.count
        guard let v = try? r.u32(), v == version, let sum = try? r.i64(), UInt64(bitPattern: sum) == checksum(bytes[head...]) else { return nil }
        var out: [Key: Range<Int>] = [:]
        do {
            let count = try r.count()
            out.reserveCapacity(count)
            for _ in 0..<count {
                let key = Key(try r.raw(SHA256.byteCount))
                let n = Int(try r.u32())
                guard r.end - r.offset >= n else { return nil }
                out[key] = r.offset..<(r.offset + n)
                r.offset += n
            }
        } catch { return nil }
        return r.atEnd ? (bytes, out) : nil
    }

    /// A 64-bit checksum of the cache's body, against a damaged or truncated file (the file is
    /// the user's own, 0600, and replaced by rename: this is no defence against an attacker,
    /// whom the ownership checks keep out). Eight bytes a step, each step a bijection of the
    /// state for a given word, so any one changed word changes the sum; about 20 times the speed
    /// of the SHA-256 it replaces (that was 13 ms of a 10,000-file load, before any file parsed).
    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.withUnsafeBytes { raw in
            var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(raw.count)
            var i = 0
            while i + 8 <= raw.count {
                h = (h ^ raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
                h ^= h >> 32
                i += 8
            }
            var tail: UInt64 = 0
            while i < raw.count {
                tail = tail << 8 | UInt64(raw[i])
                i += 1
            }
            h = (h ^ tail) &* 0xC4CE_B9FE_1A85_EC53
            return h ^ (h >> 29)
        }
    }

    struct Corrupt: Error {}

    /// Little-endian fields; strings and blobs length-prefixed.
    struct Writer {
        var bytes: [UInt8] = []
        mutating func raw(_ b: [UInt8]) { bytes += b }
        mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
        mutating func i64(_ v: Int64) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
        mutating func u64(_ v: UInt64) { i64(Int64(bitPattern: v)) }
        mutating func blob(_ b: [UInt8]) {
            u32(UInt32(b.count))
            bytes += b
        }
        mutating func string(_ s: String) { blob(Array(s.utf8)) }
        mutating func line(_ l: Int?) { i64(l.map(Int64.init) ?? -1) }
        /// A table without its file (the reader supplies the current one).
        mutating func table(_ t: ConfigTable) {
            string(t.path)
            line(t.line)
            u32(UInt32(t.keys.count))
            for k in t.keys { string(k) }
            u32(UInt32(t.entries.count))
            for k in t.entries.keys.sorted() {
                string(k)
                node(t.entries[k]!)
            }
        }
        mutating func node(_ n: ConfigNode) {
            line(n.line)
            switch n.value {
            case .string(let s):
                bytes.append(0)
                string(s)
            case .int(let i):
                bytes.append(1)
                i64(Int64(i))
            case .double(let d):
                bytes.append(2)
                i64(Int64(bitPattern: d.bitPattern))
            case .bool(let b):
                bytes.append(3)
                bytes.append(b ? 1 : 0)
            case .array(let a):
                bytes.append(4)
                u32(UInt32(a.count))
                for e in a { node(e) }
            case .table(let t):
                bytes.append(5)
                table(t)
            case .other(let o):
                bytes.append(6)
                string(o)
            }
        }
    }

    /// Reads what ``Writer`` wrote; throws ``Corrupt`` at anything out of bounds or unknown.
    struct Reader {
        let bytes: [UInt8]
        var offset = 0
        /// Where the bytes read end (a part of `bytes`: one entry of a cache file).
        var end: Int
        var depth = 0
        var atEnd: Bool { offset == end }

        init(bytes: [UInt8], offset: Int = 0, end: Int? = nil) {
            self.bytes = bytes
            self.offset = offset
            self.end = end ?? bytes.count
        }

        mutating func raw(_ n: Int) throws -> [UInt8] {
            guard n >= 0, end - offset >= n else { throw Corrupt() }
            defer { offset += n }
            return Array(bytes[offset..<(offset + n)])
        }
        mutating func byte() throws -> UInt8 {
            guard offset < end else { throw Corrupt() }
            defer { offset += 1 }
            return bytes[offset]
        }
        mutating func u32() throws -> UInt32 {
            guard end - offset >= 4 else { throw Corrupt() }
            var v: UInt32 = 0
            for i in 0..<4 { v |= UInt32(bytes[offset + i]) << (8 * UInt32(i)) }
            offset += 4
            return v
        }
        mutating func i64() throws -> Int64 {
            guard end - offset >= 8 else { throw Corrupt() }
            var v: UInt64 = 0
            for i in 0..<8 { v |= UInt64(bytes[offset + i]) << (8 * UInt64(i)) }
            offset += 8
            return Int64(bitPattern: v)
        }
        mutating func blob() throws -> [UInt8] { try raw(Int(try u32())) }
        mutating func string() throws -> String {
            let n = Int(try u32())
            guard end - offset >= n else { throw Corrupt() }
            defer { offset += n }
            return String(decoding: bytes[offset..<(offset + n)], as: UTF8.self)
        }
        mutating func line() throws -> Int? {
            let v = try i64()
            guard v >= -1 else { throw Corrupt() }
            return v < 0 ? nil : Int(v)
        }
        /// Counts are bounded by the bytes left, so a corrupt count cannot make a huge array.
        mutating func count() throws -> Int {
            let n = Int(try u32())
            guard n <= end - offset else { throw Corrupt() }
            return n
        }
        mutating func table(file: String) throws -> ConfigTable {
            depth += 1
            defer { depth -= 1 }
            guard depth < 256 else { throw Corrupt() }
            let path = try string()
            let line = try line()
            var keys: [String] = []
            for _ in 0..<(try count()) { keys.append(try string()) }
            var entries: [String: ConfigNode] = [:]
            for _ in 0..<(try count()) {
                let k = try string()
                entries[k] = try node(file: file)
            }
            guard keys.allSatisfy({ entries[$0] != nil }) else { throw Corrupt() }
            return ConfigTable(file: file, path: path, line: line, keys: keys, entries: entries)
        }
        mutating func node(file: String) throws -> ConfigNode {
            let line = try line()
            switch try byte() {
            case 0: return ConfigNode(value: .string(try string()), line: line)
            case 1: return ConfigNode(value: .int(Int(try i64())), line: line)
            case 2: return ConfigNode(value: .double(Double(bitPattern: UInt64(bitPattern: try i64()))), line: line)
            case 3:
                let b = try byte()
                guard b <= 1 else { throw Corrupt() }
                return ConfigNode(value: .bool(b == 1), line: line)
            case 4:
                depth += 1
                defer { depth -= 1 }
                guard depth < 256 else { throw Corrupt() }
                var a: [ConfigNode] = []
                for _ in 0..<(try count()) { a.append(try node(file: file)) }
                return ConfigNode(value: .array(a), line: line)
            case 5: return ConfigNode(value: .table(try table(file: file)), line: line)
            case 6: return ConfigNode(value: .other(try string()), line: line)
            default: throw Corrupt()
            }
        }
    }
}
