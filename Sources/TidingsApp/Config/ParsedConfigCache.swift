import FoundationEssentials
import Glibc
import Synchronization
import TidingsCrypto
import TidingsPluginAPI

/// Parsed plugin files kept between runs (issue 33: parsing 10,000 `plugins.d` files was a
/// quarter of `config check`, `sources` and `status`).
///
/// An entry is kept under the file's name with what one `fstatat` says of it (device, inode,
/// size, modification and change times in nanoseconds: its ``Identity``), the SHA-256 of the
/// bytes it was parsed from, and when that was checked (``Stored/verifiedAt``, this machine's
/// clock, read before the file was). A file whose status is the entry's is served without being
/// opened (``fresh(name:status:file:)``), unless the entry is *racy* (git's rule): its file was
/// modified or changed less than ``racyMargin`` before it was checked, so a second write in the
/// same timestamp tick, to the same size, could have left the same status over other bytes. A
/// file whose status differs, or whose entry is racy, is read and compared by content
/// (``table(_:name:status:file:)``): same bytes, the entry is served and re-dated, and rewritten
/// once no longer racy; other bytes, it is parsed again. A user cannot set a change time (any
/// write, chmod, utime or rename moves it to the clock's now), so a file edited after an entry
/// was checked never has its status. The file's trust (``PluginTrust``) is checked on every
/// load from the status taken then, and its table gets the file's current path.
///
/// The cache file (0600, ours, written atomically by rename) is ignored when it is not ours, is
/// writable by others, is of another version or fails its checksum; failing to write it is never
/// an error. Only the entries this load kept (``keep(_:_:)``) are written back, so it holds one
/// entry per plugin file and no more, and none for a file that holds a secret: the loader keeps
/// only tables whose source was built and read no inline secret
/// (``OptionReader/readInlineSecret``), so a password written in a plugin file is never copied
/// into the cache, and such a file is read on every load.
package final class ParsedConfigCache: Sendable {
    /// Where the cache is, or nil for none.
    package let path: String?
    /// The cache file's entries by file name, each read from the file (kept open) and its table
    /// decoded when its plugin file is loaded, not before: reading the cache is on the load's
    /// critical path, and its bytes held whole were 37 MB at 100,000 entries, at the load's peak.
    let stored: Entries
    /// This load's clock (nanoseconds since the epoch), read before any plugin file is: what an
    /// entry checked by content now records as ``Stored/verifiedAt``.
    let now: Int64
    /// The entries the loader kept (``keep(_:_:)``), and whether the file must be rewritten.
    private let state: Mutex<(used: [(name: String, offer: Offer)], changed: Bool)>
    /// How this load's files were served (``counts``).
    private let servedByStatus = Atomic<Int>(0), servedByContent = Atomic<Int>(0), parsedHere = Atomic<Int>(0)

    /// How long after a file was last modified or changed its entry is racy: 5 s, far above the
    /// file system's timestamp tick (the kernel's coarse clock, a few ms behind the one read
    /// here) and any write still under way when its file was read, and a margin for a file
    /// system whose clock is another machine's (NFS).
    static let racyMargin: Int64 = 5_000_000_000

    /// What one `fstatat` says of a file, compared whole.
    package struct Identity: Equatable, Sendable {
        var device: UInt64, inode: UInt64, size: Int64, modified: Int64, changed: Int64
        package init(_ st: stat) {
            device = UInt64(st.st_dev)
            inode = UInt64(st.st_ino)
            size = Int64(st.st_size)
            modified = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            changed = Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec)
        }
        init(device: UInt64, inode: UInt64, size: Int64, modified: Int64, changed: Int64) {
            (self.device, self.inode, self.size, self.modified, self.changed) = (device, inode, size, modified, changed)
        }
        /// Of an entry recorded without a status (a file not read through its directory): matches no file.
        static let none = Identity(device: 0, inode: 0, size: -1, modified: 0, changed: 0)
    }

    /// An entry of the cache file: its file's status and bytes when checked, and where its table is in the cache file.
    struct Stored: Sendable {
        var identity: Identity
        var verifiedAt: Int64
        var key: Key
        var table: Range<Int>
        /// Modified or changed too close to when it was checked for its status to stand for its bytes.
        var racy: Bool {
            identity == .none || identity.modified >= verifiedAt - ParsedConfigCache.racyMargin
                || identity.changed >= verifiedAt - ParsedConfigCache.racyMargin
        }
    }

    /// The entries of a cache file by file name: where each one's fields are in the file, read
    /// (one `pread`) and decoded when looked up. The file's bytes held whole took 37 MB at 100,000
    /// entries, and a dictionary of decoded entries 29 MB, at the load's peak (issue 33, benchmark 8).
    struct Entries: Sendable {
        /// The cache file, open for reading; closed when no copy of these entries is left.
        let file: OpenFile?
        var fd: Int32 { file?.fd ?? -1 }
        let places: [String: Place]
        final class OpenFile: Sendable {
            let fd: Int32
            init(_ fd: Int32) { self.fd = fd }
            deinit { close(fd) }
        }
        /// Where an entry's fields (after its name) start in the file, and their size with its table.
        struct Place: Sendable {
            var at: UInt32, count: UInt32
        }
        static let empty = Entries(file: nil, places: [:])
        var count: Int { places.count }
        var isEmpty: Bool { places.isEmpty }
        subscript(name: String) -> Stored? { entry(name)?.stored }
        /// The entry of `name` (its ``Stored/table`` where it is in the file), and the bytes read
        /// of it with where its table is in them; nil if there is none or it cannot be read.
        func entry(_ name: String) -> (stored: Stored, bytes: [UInt8], table: Range<Int>)? {
            guard let place = places[name], let bytes = ParsedConfigCache.read(fd, at: Int(place.at), count: Int(place.count)),
                let (stored, end) = try? Self.fields(bytes, at: 0), end == bytes.count
            else { return nil }
            var inFile = stored
            inFile.table = (Int(place.at) + stored.table.lowerBound)..<(Int(place.at) + stored.table.upperBound)
            return (inFile, bytes, stored.table)
        }
        /// The fields of an entry that follow its name, at `offset`, and where the entry ends.
        static func fields(_ bytes: [UInt8], at offset: Int) throws -> (stored: Stored, end: Int) {
            var r = Reader(bytes: bytes, offset: offset)
            let identity = Identity(
                device: UInt64(bitPattern: try r.i64()), inode: UInt64(bitPattern: try r.i64()), size: try r.i64(), modified: try r.i64(),
                changed: try r.i64())
            let verifiedAt = try r.i64()
            let key = Key(try r.raw(SHA256.byteCount))
            let n = Int(try r.u32())
            guard r.end - r.offset >= n else { throw Corrupt() }
            return (Stored(identity: identity, verifiedAt: verifiedAt, key: key, table: r.offset..<(r.offset + n)), r.offset + n)
        }
    }

    /// `count` bytes of `fd` at `offset`, or nil if it has fewer or cannot be read.
    static func read(_ fd: Int32, at offset: Int, count: Int) -> [UInt8]? {
        guard fd >= 0 else { return nil }
        var out = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset + done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            done += n
        }
        return out
    }

    /// An entry offered by this load, for ``keep(_:_:)``: the stored one (re-dated if checked by
    /// content), or one just parsed.
    package struct Offer: Sendable {
        var identity: Identity
        var verifiedAt: Int64
        var key: Key
        var table: Table
        /// The stored entry as it was (keeping it alone calls for no rewrite).
        var unchanged = false
        enum Table {
            case stored(Range<Int>)
            case parsed([UInt8])
        }
        /// The size of its table's bytes.
        var tableCount: Int {
            switch table {
            case .stored(let range): return range.count
            case .parsed(let bytes): return bytes.count
            }
        }
        var asStored: Stored? {
            guard case .stored(let range) = table else { return nil }
            return Stored(identity: identity, verifiedAt: verifiedAt, key: key, table: range)
        }
    }

    /// How this load's files were served: by their status alone, by content (read, same bytes as
    /// the entry), or parsed.
    package struct Counts: Equatable, Sendable {
        package var byStatus = 0, byContent = 0, parsed = 0
        package init(byStatus: Int = 0, byContent: Int = 0, parsed: Int = 0) {
            (self.byStatus, self.byContent, self.parsed) = (byStatus, byContent, parsed)
        }
    }
    package var counts: Counts {
        Counts(
            byStatus: servedByStatus.load(ordering: .relaxed), byContent: servedByContent.load(ordering: .relaxed), parsed: parsedHere.load(ordering: .relaxed))
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
    /// 3: entries by file name, with the file's status and when it was checked.
    static let version: UInt32 = 3

    /// This machine's clock, in nanoseconds since the epoch (the clock file times are taken from).
    package static func clock() -> Int64 {
        var t = timespec()
        clock_gettime(CLOCK_REALTIME, &t)
        return Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec)
    }

    /// A cache read from `path` (nil: no cache, everything is parsed). `now`: this load's clock,
    /// read before any plugin file is (tests give their own).
    package init(path: String?, now: Int64 = ParsedConfigCache.clock()) {
        self.path = path
        self.now = now
        stored = path.flatMap { Self.read($0) } ?? .empty
        var used: [(name: String, offer: Offer)] = []
        used.reserveCapacity(stored.count)
        state = Mutex((used, false))
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

    /// Whether any entry may serve a file by its status (no `fstatat` is worth making otherwise).
    package var mayServeByStatus: Bool { !stored.isEmpty }

    /// The table of the regular file `name` (at `file`), served by its status alone: if the
    /// cache holds an entry for it with the status `status` (one `fstatat`, not followed) and
    /// that entry is not racy, with what ``keep(_:_:)`` keeps. Nil: read the file and hand its
    /// bytes to ``table(_:name:status:file:)``.
    package func fresh(name: String, status: stat, file: String) -> (table: ConfigTable, offer: Offer)? {
        guard path != nil, let (entry, bytes, range) = stored.entry(name), !entry.racy, entry.identity == Identity(status),
            let table = decode(bytes, range, file: file)
        else { return nil }
        servedByStatus.add(1, ordering: .relaxed)
        return (table, Offer(identity: entry.identity, verifiedAt: entry.verifiedAt, key: entry.key, table: .stored(entry.table), unchanged: true))
    }

    /// The table of the file `name` (at `file`) whose bytes are `bytes`, from the cache if its
    /// entry was parsed from the same bytes, else parsed, with what ``keep(_:_:)`` keeps under
    /// `name` for the next load (nil: no cache): its `status` (the `fstat` of the descriptor the bytes were read
    /// through, taken before they were read; nil: none, the entry is then checked by content on
    /// every load). Parse errors are thrown as ``ConfigTable/parse(_:file:)`` throws them, and
    /// not kept.
    package func table(_ bytes: [UInt8], name: String, status: stat?, file: String) throws -> (table: ConfigTable, offer: Offer?) {
        guard path != nil else { return (try ConfigTable.parse(String(decoding: bytes, as: UTF8.self), file: file), nil) }
        let key = Key(SHA256.hash(bytes))
        let identity = status.map(Identity.init) ?? .none
        if let (entry, bytes, range) = stored.entry(name), entry.key == key, let table = decode(bytes, range, file: file) {
            servedByContent.add(1, ordering: .relaxed)
            var offer = Offer(identity: identity, verifiedAt: now, key: key, table: .stored(entry.table))
            // Rewritten once it is not racy, if its status changed or it was racy (re-dated, it will
            // be served by status); while racy its file is checked by content on every load in
            // any case, so the stored entry stands (its status and bytes went together).
            offer.unchanged = offer.asStored!.racy || (identity == entry.identity && !entry.racy)
            return (table, offer)
        }
        let table = try ConfigTable.parse(String(decoding: bytes, as: UTF8.self), file: file)
        var w = Writer()
        w.table(table)
        parsedHere.add(1, ordering: .relaxed)
        return (table, Offer(identity: identity, verifiedAt: now, key: key, table: .parsed(w.bytes)))
    }

    /// The table of an entry, or nil if it does not decode.
    private func decode(_ bytes: [UInt8], _ range: Range<Int>, file: String) -> ConfigTable? {
        var reader = Reader(bytes: bytes, offset: range.lowerBound, end: range.upperBound)
        guard let table = try? reader.table(file: file), reader.atEnd else { return nil }
        return table
    }

    /// Keeps the entry ``table(_:name:status:file:)`` or ``fresh(name:status:file:)`` offered
    /// for `name` (once per name) for the next load. A table not kept is not written (and an
    /// entry of the old file not kept is dropped from it). The cache file is rewritten when an
    /// entry is new, its file's status or bytes changed, or it was racy and is no longer
    /// (re-dated, it will be served by status).
    package func keep(_ name: String, _ offer: Offer) {
        state.withLock {
            $0.used.append((name, offer))
            if !offer.unchanged { $0.changed = true }
        }
    }

    /// Writes the entries used since ``init(path:now:)`` back, if they differ from those read.
    /// Failures are ignored: the cache only saves work.
    ///
    /// The body is streamed to the file a megabyte at a time, its checksum taken as it goes and
    /// written into the header last: built whole in memory it was 38 MB at 100,000 entries, 75
    /// while its array grew, at the end of the load, where a daemon's RSS peaks (issue 33,
    /// benchmark 8). The entries are ordered through their indices, not copied into a sorted array.
    /// `chunk`: how many bytes are made before they are written (tests write a few at a time).
    package func save(flushingEvery chunk: Int = 1 << 20) {
        guard let path else { return }
        let (used, changed) = state.withLock { ($0.used, $0.changed) }
        // Entries of the old file not kept by this load (a file gone, edited, or now holding a
        // secret) make it differ too: then `used` has fewer of them.
        guard changed || used.count != stored.count else { return }
        let order = used.indices.sorted { used[$0].name < used[$1].name }
        var size = 4
        for (name, e) in used { size += 4 + name.utf8.count + 6 * 8 + SHA256.byteCount + 4 + e.tableCount }
        var head = Writer()
        head.raw(Self.magic)
        head.u32(Self.version)
        head.u64(0)  // the checksum, written once the body is
        let folder = PathText.parent(path)
        _ = makeDirectories(folder, mode: 0o700)
        let temporary = "\(path).\(getpid()).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        var body = BodyStream(fd: fd, size: size)
        var ok = fchmod(fd, 0o600) == 0 && writeAll(fd, head.bytes)
        body.out.u32(UInt32(used.count))
        for i in order where ok {
            let (name, e) = used[i]
            body.out.string(name)
            body.out.u64(e.identity.device)
            body.out.u64(e.identity.inode)
            body.out.i64(e.identity.size)
            body.out.i64(e.identity.modified)
            body.out.i64(e.identity.changed)
            body.out.i64(e.verifiedAt)
            body.out.raw(e.key.bytes)
            switch e.table {
            case .stored(let range):
                guard let bytes = Self.read(stored.fd, at: range.lowerBound, count: range.count) else {
                    ok = false
                    continue
                }
                body.out.blob(bytes)
            case .parsed(let bytes):
                body.out.blob(bytes)
            }
            if body.out.bytes.count >= chunk { ok = body.flush(final: false) }
        }
        if ok, body.flush(final: true), body.written == size {
            var sum = Writer()
            sum.u64(body.sum)
            ok = sum.bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(head.bytes.count - 8)) } == sum.bytes.count
        } else {
            ok = false
        }
        close(fd)
        if !ok || rename(temporary, path) != 0 { unlink(temporary) }
    }

    /// A cache file's body written as it is made: ``out`` is flushed by ``flush(final:)``, whole
    /// words of it until the last, through ``Checksum``.
    private struct BodyStream {
        let fd: Int32
        var out = Writer()
        var checksum: Checksum
        var written = 0
        /// The body's checksum, once flushed with `final`.
        var sum: UInt64 = 0
        init(fd: Int32, size: Int) {
            self.fd = fd
            checksum = Checksum(count: size)
            out.bytes.reserveCapacity(1 << 20 + 64 << 10)
        }
        mutating func flush(final: Bool) -> Bool {
            let words = out.bytes.count & ~7
            let n = final ? out.bytes.count : words
            out.bytes.withUnsafeBytes { raw in
                checksum.words(UnsafeRawBufferPointer(rebasing: raw[0..<words]))
                if final { sum = checksum.finish(tail: UnsafeRawBufferPointer(rebasing: raw[words...])) }
            }
            guard out.bytes.withUnsafeBytes({ writeAll(fd, UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) else { return false }
            written += n
            out.bytes.removeFirst(n)
            return true
        }
    }

    /// The entries of the cache file at `path` (kept open), or nil if it is missing, not a regular
    /// file owned by us, writable by group or others, of another version or corrupt. The file is
    /// mapped to check it and list its entries, then unmapped.
    static func read(_ path: String) -> Entries? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid(), st.st_mode & 0o022 == 0, st.st_size > 0,
            st.st_size <= Int(UInt32.max), let map = mmap(nil, Int(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0),
            map != UnsafeMutableRawPointer(bitPattern: -1)
        else {
            close(fd)
            return nil
        }
        _ = madvise(map, Int(st.st_size), MADV_SEQUENTIAL)
        let places = index(UnsafeRawBufferPointer(start: map, count: Int(st.st_size)))
        munmap(map, Int(st.st_size))
        guard let places else {
            close(fd)
            return nil
        }
        return Entries(file: Entries.OpenFile(fd), places: places)
    }

    /// Where each entry of a cache file's bytes is, or nil if they are not a whole cache of this version.
    static func index(_ raw: UnsafeRawBufferPointer) -> [String: Entries.Place]? {
        let head = magic.count + 4 + 8
        guard raw.count >= head, raw.count <= Int(UInt32.max), raw.prefix(magic.count).elementsEqual(magic) else { return nil }
        func u32(_ at: Int) -> Int { Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: at, as: UInt32.self))) }
        guard u32(magic.count) == Int(version),
            UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: magic.count + 4, as: UInt64.self)) == checksum(UnsafeRawBufferPointer(rebasing: raw[head...])),
            raw.count - head >= 4
        else { return nil }
        var at = head + 4
        let count = u32(head)
        guard count <= raw.count - at else { return nil }
        var out: [String: Entries.Place] = [:]
        out.reserveCapacity(count)
        let fixed = 6 * 8 + SHA256.byteCount
        for _ in 0..<count {
            guard raw.count - at >= 4 else { return nil }
            let n = u32(at)
            at += 4
            guard raw.count - at >= n else { return nil }
            let name = String(decoding: UnsafeRawBufferPointer(rebasing: raw[at..<(at + n)]), as: UTF8.self)
            at += n
            let start = at
            guard raw.count - at >= fixed + 4 else { return nil }
            at += fixed
            let t = u32(at)
            at += 4
            guard raw.count - at >= t else { return nil }
            at += t
            out[name] = Entries.Place(at: UInt32(start), count: UInt32(at - start))
        }
        return at == raw.count ? out : nil
    }

    /// A 64-bit checksum of the cache's body, against a damaged or truncated file (the file is
    /// the user's own, 0600, and replaced by rename: this is no defence against an attacker,
    /// whom the ownership checks keep out). Eight bytes a step, each step a bijection of the
    /// state for a given word, so any one changed word changes the sum; about 20 times the speed
    /// of the SHA-256 it replaces (that was 13 ms of a 10,000-file load, before any file parsed).
    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.withUnsafeBytes { checksum($0) }
    }
    static func checksum(_ raw: UnsafeRawBufferPointer) -> UInt64 {
        var c = Checksum(count: raw.count)
        let words = raw.count & ~7
        c.words(UnsafeRawBufferPointer(rebasing: raw[0..<words]))
        return c.finish(tail: UnsafeRawBufferPointer(rebasing: raw[words...]))
    }

    /// ``checksum(_:)`` taken in parts: of a body of `count` bytes, given as whole words, then
    /// its last `count % 8` bytes.
    struct Checksum {
        private var h: UInt64
        init(count: Int) { h = 0x9E37_79B9_7F4A_7C15 ^ UInt64(count) }
        /// Bytes whose count is a multiple of 8.
        mutating func words(_ raw: UnsafeRawBufferPointer) {
            var h = self.h
            var i = 0
            while i + 8 <= raw.count {
                h = (h ^ raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
                h ^= h >> 32
                i += 8
            }
            self.h = h
        }
        func finish(tail: UnsafeRawBufferPointer) -> UInt64 {
            var t: UInt64 = 0
            for b in tail { t = t << 8 | UInt64(b) }
            let h = (self.h ^ t) &* 0xC4CE_B9FE_1A85_EC53
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
            let keyCount = try count()
            var keys: [String] = []
            keys.reserveCapacity(keyCount)
            for _ in 0..<keyCount { keys.append(try string()) }
            let entryCount = try count()
            var entries: [String: ConfigNode] = [:]
            entries.reserveCapacity(entryCount)
            for _ in 0..<entryCount {
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
