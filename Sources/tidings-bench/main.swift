import Foundation
import TidingsEngine
import TidingsPluginAPI
import TidingsSQLite

// Benchmark 3 of `make bench`: items per second through de-duplication plus the
// one-transaction commit (PollRecorder.recordSuccess) on a real SQLite file.
//
//   tidings-bench dedupe [--dir DIR] [--snapshot 1000] [--total 1000000] [--sources 10]
//
// Each round gives a source a snapshot of `--snapshot` items derived from its previous one:
// ~94% unchanged, 3% changed, 1.5% new, 1.5% removed (a realistic mix). Only the time
// spent in recordSuccess counts; building the snapshot (the provider's work) does not.
// Prints one JSON object.

struct NoProvider: Provider {
    func poll(_ context: PollContext) async throws -> PollResult { .notModified }
}

func arg(_ name: String, _ def: String) -> String {
    let a = CommandLine.arguments
    if let i = a.firstIndex(of: name), i + 1 < a.count { return a[i + 1] }
    return def
}

func item(_ source: Int, _ id: Int, _ version: Int) -> Item {
    let data: JSONValue = [
        "id": .number(Double(id)), "title": .string("Item \(id) of source \(source)"),
        "status": .string(version % 2 == 0 ? "open" : "pending"), "version": .number(Double(version)),
        "url": .string("https://example.com/items/\(id)"),
    ]
    return Item(
        key: "k\(id)", kind: "item", title: "Item \(id) v\(version)", body: "body of item \(id)",
        url: "https://example.com/items/\(id)", data: data)
}

/// Time of one call, seconds.
func timed(_ f: () throws -> Void) rethrows -> Double {
    let t0 = DispatchTime.now().uptimeNanoseconds
    try f()
    return Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
}

func run() throws {
    guard CommandLine.arguments.dropFirst().first == "dedupe" else {
        FileHandle.standardError.write(Data("usage: tidings-bench dedupe [--dir DIR] [--snapshot N] [--total N] [--sources N]\n".utf8))
        exit(2)
    }
    let dir = arg("--dir", NSTemporaryDirectory() + "tidings-bench-\(getpid())")
    let snapshotSize = Int(arg("--snapshot", "1000"))!
    let total = Int(arg("--total", "1000000"))!
    let sourceCount = Int(arg("--sources", "10"))!
    try? FileManager.default.removeItem(atPath: dir)
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let store = try StateStore(path: dir + "/tidings.sqlite")
    let recorder = PollRecorder(store: store)
    let options = RecordOptions(router: Router(routes: [], allSinks: ["console"]))
    let sources = (0..<sourceCount).map { i in
        SourceConfig(
            name: "bench\(i)", provider: "http-json", settings: SourceSettings(), flapWindow: 0,
            instance: NoProvider(), file: "bench", line: nil, configHash: "bench")
    }
    // Per source: the live item ids with their versions, and the next fresh id.
    var live: [[(id: Int, version: Int)]] = sources.indices.map { _ in (0..<snapshotSize).map { ($0, 0) } }
    var nextID = [Int](repeating: snapshotSize, count: sourceCount)
    var rng = SystemRandomNumberGenerator()
    let now0 = Date()

    var perSnapshot: [Double] = []  // seconds per recordSuccess (after the baselines)
    var baselineTime = 0.0
    var steadyTime = 0.0
    var items = 0
    var events = 0
    var round = 0
    while items < total {
        for (s, source) in sources.enumerated() where items < total {
            if round > 0 {
                let n = live[s].count
                for _ in 0..<(n * 3 / 100) { live[s][Int.random(in: 0..<n, using: &rng)].version += 1 }
                for _ in 0..<(n * 15 / 1000) { live[s].remove(at: Int.random(in: 0..<live[s].count, using: &rng)) }
                for _ in 0..<(snapshotSize - live[s].count) {
                    live[s].append((nextID[s], 0))
                    nextID[s] += 1
                }
            }
            let snapshot = live[s].map { item(s, $0.id, $0.version) }
            let now = now0.addingTimeInterval(Double(round * 60))
            var produced = 0
            let t = try timed {
                let r = try recorder.recordSuccess(
                    source, result: .snapshot(snapshot, validators: Validators(etag: "\"r\(round)\"")), now: now, options: options)
                produced = r.events.count
            }
            if round == 0 {
                baselineTime += t
            } else {
                steadyTime += t
                perSnapshot.append(t)
            }
            events += produced
            items += snapshot.count
        }
        round += 1
    }
    let sorted = perSnapshot.sorted()
    let median = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    let baselineItems = min(total, sourceCount * snapshotSize)
    let out: JSONValue = [
        "snapshot_items": .number(Double(snapshotSize)),
        "total_items": .number(Double(items)),
        "snapshots": .number(Double(perSnapshot.count + sourceCount)),
        "events": .number(Double(events)),
        "seconds_total": .number(baselineTime + steadyTime),
        "items_per_s_total": .number(Double(items) / (baselineTime + steadyTime)),
        "items_per_s_baseline": .number(Double(baselineItems) / max(baselineTime, 1e-9)),
        "items_per_s_snapshot_median": .number(median > 0 ? Double(snapshotSize) / median : 0),
        "snapshot_ms_median": .number(median * 1000),
        "snapshot_ms_p99": .number(sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * 0.99))] * 1000),
    ]
    print(out.jsonString())
    try? FileManager.default.removeItem(atPath: dir)
}

do { try run() } catch {
    FileHandle.standardError.write(Data("tidings-bench: \(error)\n".utf8))
    exit(1)
}
