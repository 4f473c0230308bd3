import CDynamicLoad
import Glibc
import TidingsPluginAPI

/// Hands memory the daemon no longer needs back to the kernel: the C heap's free pages, and the
/// pages of code and read-only data that only start-up ran.
///
/// Loading 10,000 sources parses their files on every core: each parsing thread allocates in
/// a malloc arena of its own, and what the load freed there stays in the daemon's RSS (glibc
/// trims only the top of the main heap by itself). The daemon calls ``release()`` once a
/// generation is running and then every minute: free memory leaves the RSS, live memory is
/// untouched.
package enum FreeMemory {
    @_silgen_name("malloc_trim")
    private static func malloc_trim(_ pad: Int) -> Int32

    package static func release() {
        _ = malloc_trim(0)
    }

    @_silgen_name("mallopt")
    private static func mallopt(_ parameter: Int32, _ value: Int32) -> Int32
    /// glibc's `M_ARENA_MAX` (malloc.h).
    private static let arenaMaxParameter: Int32 = -8

    /// One malloc arena from now on (glibc's default is up to 8 per core), for the daemon,
    /// called before it loads anything. Issue 33: each thread that allocates while another
    /// holds its arena gets an arena of its own, and what the parallel load and each status pass
    /// freed there stays resident around the live blocks made beside it (malloc_trim returns only
    /// whole free pages). `bench/unheld.py --polled` at 100,000 sources not held (live heap 63 MB
    /// in every case): 10 arenas RSS 128 MiB, 2 arenas 109–119 MiB, 1 arena 79 MiB; the load's
    /// CPU 2.5–3.1 s → 3.5 s (one allocator lock for the parsing workers).
    ///
    /// And a fixed `M_MMAP_THRESHOLD`: a block of ``daemonMmapThreshold`` or more is a mapping of
    /// its own, unmapped when freed. glibc's threshold otherwise rises to the size of each mapped
    /// block freed (up to 32 MiB): after the load freed its big arrays, the lists a start or a
    /// takeover builds (tens of MB at 100,000 sources) came from the heap, and their pages stayed
    /// resident between the blocks allocated after them. One daemon holding 33,000 of 100,000
    /// sources after a takeover: RSS 137–142 → 91–94 MiB.
    package static func limitArenas() {
        _ = mallopt(arenaMaxParameter, daemonArenas)
        _ = mallopt(mmapThresholdParameter, daemonMmapThreshold)
    }

    static let daemonArenas: Int32 = 1
    /// glibc's `M_MMAP_THRESHOLD` (malloc.h); setting it also stops the trim threshold's
    /// dynamic adjustment.
    private static let mmapThresholdParameter: Int32 = -3
    /// glibc's default before it adjusts it.
    static let daemonMmapThreshold: Int32 = 128 << 10

    /// What ``dropStartupPages()`` did: bytes advised, and the resident set before and after (bytes).
    package struct Dropped: Equatable {
        var advised: Int
        var residentBefore: Int
        var residentAfter: Int
    }

    /// Unmaps the resident pages of the binary's and the libraries' code and read-only data, so
    /// that only what runs next maps back (issue 31: idle, the daemon held 13 MiB of `.text`
    /// resident for 1.7 MiB of code ever run; the kernel maps 64 KiB around each fault, and
    /// start-up and the configuration load run code all over the binary). Called once a
    /// generation is running (start and each reload), and by `tidings check` between loading
    /// the configuration and polling. Nil when /proc/self/smaps cannot be read.
    ///
    /// Why it is safe while other threads run: `MADV_DONTNEED` over a private file mapping whose
    /// pages are all unmodified file pages only drops their page-table entries; the pages stay
    /// in the page cache (the file is mapped, so it stays open), and the next access by any
    /// thread, to run that code or read that constant, takes a minor fault that maps the same
    /// bytes back. Nothing but time can tell. What a private mapping has modified (relocated
    /// pointers, `.data`, `.bss`, RELRO, a debugger's breakpoint) would revert to the file's
    /// bytes or to zeros, so two independent checks keep every such page out:
    /// - only mappings that /proc/self/smaps shows private, not writable, backed by a file and
    ///   with `Anonymous: 0 kB` (no page copied on write) (``cleanFileRanges(smaps:)``);
    /// - inside those, only the pages of `PT_LOAD` segments that the ELF headers mark not
    ///   writable, of objects without text relocations, advised inside `dl_iterate_phdr`
    ///   (CDynamicLoad's `tidings_dl_advise_read_only`), where the loader holds its lock: no
    ///   dlopen or dlclose can map or unmap an object between the check and the advice;
    /// - in the executable's writable segment (where GNU ld puts `.eh_frame`, `.eh_frame_hdr`,
    ///   Swift's metadata sections beside `.data`), only whole pages of sections without write
    ///   permission that /proc/self/pagemap shows still the file's (not copied): nothing writes
    ///   those sections at run time, so no write can land between that check and the advice
    ///   (`tidings_dl_advise_executable_read_only_sections`).
    package static func dropStartupPages() -> Dropped? {
        let fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        let bytes = readBytes(fd, upTo: 64 << 20)
        close(fd)
        guard let bytes else { return nil }
        let before = residentBytes()
        let flat = bytes.withUnsafeBufferPointer { cleanFileRanges(smaps: $0) }.flatMap { [$0.start, $0.end] }
        let advised =
            flat.withUnsafeBufferPointer { tidings_dl_advise_read_only(MADV_DONTNEED, $0.baseAddress, flat.count / 2) }
            + tidings_dl_advise_executable_read_only_sections(MADV_DONTNEED)
        return Dropped(advised: Int(advised), residentBefore: before, residentAfter: residentBytes())
    }

    /// An address range of /proc/self/smaps, `start` included, `end` not.
    struct AddressRange: Equatable {
        var start: UInt
        var end: UInt
    }

    /// The mappings of a /proc/PID/smaps text whose pages are all clean pages of a file: private
    /// (`p`), not writable, a path, and `Anonymous: 0 kB` (a mapping without that line is left out).
    static func cleanFileRanges(smaps: String) -> [AddressRange] {
        var text = smaps
        return text.withUTF8 { cleanFileRanges(smaps: $0) }
    }

    /// The same over the bytes as read: one pass, no strings (with libcurl's 33 libraries loaded
    /// smaps is 160 KB; splitting it into lines and fields took 5.7 ms of a 35 ms `check`).
    static func cleanFileRanges(smaps: UnsafeBufferPointer<UInt8>) -> [AddressRange] {
        var out: [AddressRange] = []
        var current: AddressRange? = nil
        var candidate = false
        let anonymous = Array("Anonymous:".utf8)
        var lineStart = 0
        while lineStart < smaps.count {
            var lineEnd = lineStart
            while lineEnd < smaps.count && smaps[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
            defer { lineStart = lineEnd + 1 }
            let line = UnsafeBufferPointer(rebasing: smaps[lineStart..<lineEnd])
            guard let first = line.first else { continue }
            if hexValue(first) == nil {
                // A field line ("Name:   value kB"): only Anonymous counts.
                guard line.starts(with: anonymous) else { continue }
                let value = line.dropFirst(anonymous.count).drop(while: { $0 == UInt8(ascii: " ") })
                if candidate, let range = current, value.first == UInt8(ascii: "0"),
                    value.dropFirst().first == UInt8(ascii: " ")
                {
                    out.append(range)
                }
                candidate = false
                continue
            }
            // A mapping's first line: START-END PERMS OFFSET DEV INODE [PATH]
            current = nil
            candidate = false
            let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5, let dash = fields[0].firstIndex(of: UInt8(ascii: "-")),
                let start = hexNumber(fields[0][..<dash]), let end = hexNumber(fields[0][(dash + 1)...]), start < end
            else { continue }
            current = AddressRange(start: start, end: end)
            let perms = fields[1]
            candidate =
                perms.count == 4 && perms[perms.startIndex + 1] != UInt8(ascii: "w")
                && perms[perms.startIndex + 3] == UInt8(ascii: "p")
                && fields.count == 6 && fields[5].drop(while: { $0 == UInt8(ascii: " ") }).first == UInt8(ascii: "/")
        }
        return out
    }

    private static func hexValue(_ c: UInt8) -> UInt? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt(c - UInt8(ascii: "a") + 10)
        default: nil
        }
    }

    /// A lower-case hexadecimal number of at most 16 digits, nil otherwise.
    private static func hexNumber(_ digits: Slice<UnsafeBufferPointer<UInt8>>) -> UInt? {
        guard !digits.isEmpty, digits.count <= 16 else { return nil }
        var n: UInt = 0
        for c in digits {
            guard let v = hexValue(c) else { return nil }
            n = n << 4 | v
        }
        return n
    }

    /// The resident set now (bytes): /proc/self/statm's second field, in pages.
    static func residentBytes() -> Int {
        let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        guard let bytes = readBytes(fd, upTo: 4096) else { return 0 }
        let fields = String(decoding: bytes, as: UTF8.self).split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
