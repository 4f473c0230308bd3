import Glibc
import XCTest

@testable import TidingsApp

/// A global the test writes at run time: its page of `.data`/`.bss` is then a private copy
/// (copied on write), which a drop of the binary's clean pages must leave alone.
nonisolated(unsafe) private var written: [Int] = []
nonisolated(unsafe) private var counter = 0

/// ``FreeMemory/dropStartupPages()`` (issue 31: the idle daemon's code pages) on this test process.
final class FreeMemoryTests: XCTestCase {
    /// Mappings as /proc/PID/smaps shows them (an idle daemon's, cut down): only private,
    /// non-writable file mappings with `Anonymous: 0 kB` are clean.
    func testCleanRangesAreTheUnmodifiedReadOnlyFileMappings() {
        let smaps = """
            55652e149000-55652e155000 r--p 00000000 fe:00 16556208                   /usr/bin/tidings
            Size:                 48 kB
            Rss:                  48 kB
            Private_Clean:        48 kB
            Anonymous:             0 kB
            VmFlags: rd mr mw me sd
            55652e155000-55652f3c2000 r-xp 0000c000 fe:00 16556208                   /usr/bin/tidings
            Rss:               13224 kB
            Anonymous:             0 kB
            VmFlags: rd ex mr mw me sd
            55652f3c2000-55652fc32000 rw-p 01279000 fe:00 16556208                   /usr/bin/tidings
            Rss:                3780 kB
            Anonymous:           964 kB
            55652fc32000-55652fc40000 rw-p 00000000 00:00 0
            Anonymous:             0 kB
            5565304a1000-5565304c2000 rw-p 00000000 00:00 0                          [heap]
            Anonymous:           132 kB
            7f660899a000-7f66089ed000 r--p 0017c000 fe:00 333151                     /usr/lib/x86_64-linux-gnu/libc.so.6
            Anonymous:             0 kB
            7f66089ed000-7f66089f1000 r--p 001cf000 fe:00 333151                     /usr/lib/x86_64-linux-gnu/libc.so.6
            Anonymous:            16 kB
            7f66089f1000-7f66089f3000 rw-p 001d3000 fe:00 333151                     /usr/lib/x86_64-linux-gnu/libc.so.6
            Anonymous:             8 kB
            7f6608dc5000-7f6608dcd000 rw-s 00000000 fe:00 16761682                   /var/lib/tidings/tidings.sqlite-shm
            Anonymous:             0 kB
            7f6608dd0000-7f6608dd4000 r--s 00000000 fe:00 16761683                   /var/lib/tidings/other
            Anonymous:             0 kB
            7f6608de0000-7f6608de4000 r-xp 00000000 fe:00 16761684                   /opt/lib/with space (deleted)
            Anonymous:             0 kB
            7f6608df0000-7f6608df4000 r-xp 00000000 fe:00 16761685                   /opt/lib/no-anonymous-line.so
            Rss:                  16 kB
            7ffd1e5f1000-7ffd1e5f5000 r--p 00000000 00:00 0                          [vvar]
            Anonymous:             0 kB
            7ffd1e5f5000-7ffd1e5f7000 r-xp 00000000 00:00 0                          [vdso]
            Anonymous:             0 kB
            """
        let ranges = FreeMemory.cleanFileRanges(smaps: smaps).map { String($0.start, radix: 16) + "-" + String($0.end, radix: 16) }
        XCTAssertEqual(
            ranges,
            [
                "55652e149000-55652e155000", "55652e155000-55652f3c2000", "7f660899a000-7f66089ed000", "7f6608de0000-7f6608de4000",
            ])
        XCTAssertEqual(FreeMemory.cleanFileRanges(smaps: ""), [])
        XCTAssertEqual(FreeMemory.cleanFileRanges(smaps: "garbage\nAnonymous: 0 kB\n"), [])
    }

    /// The drop unmaps this process's resident code, and everything goes on: code runs again,
    /// and what the loader relocated (GOT, `.data.rel.ro`: a reverted page there crashes the
    /// next call through it) and the process wrote (globals, heap) is still there.
    func testDropReleasesCodeAndKeepsWhatTheProcessWrote() throws {
        written = Array(0..<1000)
        counter = 0x5eed
        var local = [String: Int]()
        for i in 0..<100 { local["k\(i)"] = i * i }
        let dropped = try XCTUnwrap(FreeMemory.dropStartupPages())
        XCTAssertGreaterThan(dropped.advised, 1 << 20, "the test binary's code and libraries' read-only segments")
        XCTAssertGreaterThan(dropped.residentBefore, dropped.residentAfter)
        XCTAssertEqual(counter, 0x5eed)
        XCTAssertEqual(written.reduce(0, +), 499_500)
        XCTAssertEqual(local["k99"], 9801)
        // Swift metadata (in GNU ld's writable segment, dropped page by page) reads back whole.
        XCTAssertEqual(Mirror(reflecting: dropped).children.compactMap(\.label), ["advised", "residentBefore", "residentAfter"])
        XCTAssertEqual(String(describing: type(of: dropped)), "Dropped")
        // Again, with the code that just ran mapped back by its faults.
        let again = try XCTUnwrap(FreeMemory.dropStartupPages())
        XCTAssertGreaterThan(again.advised, 0)
        XCTAssertEqual(counter, 0x5eed)
        XCTAssertEqual(FreeMemory.cleanFileRanges(smaps: "").count, 0)
    }

    /// The daemon's fixed mmap threshold (issue 33): after a big block is freed, 1 MiB blocks
    /// that do not fit in the heap's free space are mappings of their own. glibc's dynamic
    /// threshold would have risen to the freed block's 8 MiB and grown the heap for them, where
    /// their pages stay resident after they are freed (between blocks allocated after them).
    /// The first blocks may come from free space the test process has; 512 MiB cannot.
    func testBlocksAboveTheThresholdStayMappingsAfterABigOneIsFreed() throws {
        FreeMemory.limitArenas()
        let big = try XCTUnwrap(malloc(8 << 20))
        memset(big, 1, 8 << 20)
        free(big)
        var blocks: [UnsafeMutableRawPointer] = []
        defer { blocks.forEach { free($0) } }
        // glibc's chunk header: the size word just before the block; IS_MMAPPED is its bit 1.
        func mapped(_ p: UnsafeMutableRawPointer) -> Bool { p.load(fromByteOffset: -MemoryLayout<Int>.size, as: Int.self) & 2 != 0 }
        while blocks.count < 512 {
            blocks.append(try XCTUnwrap(malloc(1 << 20)))
            if mapped(blocks[blocks.count - 1]) { break }
        }
        XCTAssertTrue(mapped(blocks[blocks.count - 1]), "\(blocks.count) blocks of 1 MiB, none a mapping of its own")
    }
}
