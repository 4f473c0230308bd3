import CoreMetrics
import FoundationEssentials
import Metrics
import Synchronization
import TidingsPluginAPI

/// The daemon's metrics (DESIGN §8), recorded through swift-metrics. Core code records here;
/// the executable bootstraps an exporter once per process (TidingsMonitoring). Every name,
/// label, help text and bucket list is defined in this file once. Without a bootstrapped
/// backend (the CLI, unit tests) every call is a no-op.
///
/// Cardinality stays linear in sources: per source there are only counters and gauges (polls
/// by outcome, up, last success, events by type); the histograms carry no source label.
package enum TidingsMetrics {
    /// One exported metric family.
    package struct Family: Sendable {
        package enum Kind: Sendable, Equatable {
            case counter, gauge
            /// Bucket upper bounds in seconds.
            case histogram(buckets: [Double])
        }
        package let name: String
        package let kind: Kind
        /// The `# HELP` line.
        package let help: String
    }

    package static let polls = Family(
        name: "tidings_polls_total", kind: .counter,
        help: "Polls by source and outcome (success, failure), scheduled and on request.")
    package static let pollDuration = Family(
        name: "tidings_poll_duration_seconds", kind: .histogram(buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]),
        help: "How long polls took, all sources together.")
    package static let sourceUp = Family(
        name: "tidings_source_up", kind: .gauge,
        help: "1 if the source's last scheduled poll succeeded, 0 if it failed.")
    package static let lastSuccess = Family(
        name: "tidings_source_last_success_timestamp_seconds", kind: .gauge,
        help: "When the source was last polled successfully, in unix seconds.")
    package static let events = Family(
        name: "tidings_events_total", kind: .counter,
        help: "Events created, by source and type (new, changed, removed, reminder, error, recovered).")
    package static let silencedEvents = Family(
        name: "tidings_events_silenced_total", kind: .counter,
        help: "Events a silence kept from their sinks (recorded in history, not delivered), by source.")
    package static let deliveries = Family(
        name: "tidings_deliveries_total", kind: .counter,
        help: "Delivery attempts by sink and outcome (delivered, retry, dead, disabled), one per event.")
    package static let outboxPending = Family(
        name: "tidings_outbox_pending", kind: .gauge,
        help: "Deliveries queued for the sink, waiting or retrying (not those held for quiet hours or group_wait).")
    package static let outboxHeld = Family(
        name: "tidings_outbox_held", kind: .gauge,
        help: "Deliveries held for the sink by a route's quiet hours or group_wait, to go out as a digest.")
    package static let outboxDead = Family(
        name: "tidings_outbox_dead", kind: .gauge,
        help: "Dead letters of the sink (see tidings outbox; tidings outbox retry requeues them).")
    package static let deadLettersPruned = Family(
        name: "tidings_dead_letters_pruned_total", kind: .counter,
        help: "Dead letters removed after dead_letter_days, by sink.")
    package static let lateness = Family(
        name: "tidings_scheduler_lateness_seconds", kind: .histogram(buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30]),
        help: "How late scheduled polls started against their due time, all sources together.")
    package static let pollsOverrunning = Family(
        name: "tidings_polls_overrunning", kind: .gauge,
        help: "Polls still running past their timeout (failed, but their work has not stopped), updated every 5 s.")
    package static let behind = Family(
        name: "tidings_scheduler_behind_seconds", kind: .gauge,
        help: "How late scheduled polls start, 99th percentile over the last minute (0: none started), updated every 5 s.")
    package static let buildInfo = Family(
        name: "tidings_build_info", kind: .gauge,
        help: "Always 1; the version label says which tidings runs.")

    package static let families = [
        polls, pollDuration, sourceUp, lastSuccess, events, silencedEvents, deliveries, outboxPending, outboxHeld, outboxDead, deadLettersPruned, lateness, behind,
        pollsOverrunning, buildInfo,
    ]

    /// What became of a delivery attempt, per event (the `outcome` label).
    package enum DeliveryOutcome: String, Sendable, CaseIterable {
        /// The sink accepted it.
        case delivered
        /// It failed and stays queued for another attempt.
        case retry
        /// A dead letter: refused, too old, or its event cannot be read.
        case dead
        /// The sink's endpoint is gone (HTTP 410); the sink is disabled until reload.
        case disabled
    }

    /// The `outcome` label of `tidings_polls_total`.
    private enum PollLabel: String, CaseIterable { case success, failure }

    // MARK: recording

    /// One poll of `source` ended: the poll, its duration and events, and the source's health
    /// (a poll on request does not count for health, but its success is a success).
    package static func polled(_ source: String, _ outcome: PollOutcome, accounting: PollAccounting, seconds: Double, now: Date) {
        switch outcome {
        case .skipped:
            // Not polled (credentials were rejected before): no request was made.
            return sourceHealth(source, .authFailed, lastSuccess: nil)
        case .deferred:
            // Deferred to the remote's minimum interval: no request was made.
            return
        case .succeeded, .failed, .authFailed, .unrecorded, .notOwned: break
        }
        let result = outcome.error == nil ? PollLabel.success : .failure
        RecentPolls.shared.record(
            source,
            .init(
                at: now, seconds: max(0, seconds), error: outcome.error.map { Redactor.shared.scrub("\($0)") },
                events: outcome.record.events.count))
        Counter(label: polls.name, dimensions: [("source", source), ("outcome", result.rawValue)]).increment()
        CoreMetrics.Timer(label: pollDuration.name).record(max(0, seconds))
        for e in outcome.record.events {
            Counter(label: events.name, dimensions: [("source", e.source), ("type", e.event.rawValue)]).increment()
        }
        if !outcome.record.silenced.isEmpty {
            Counter(label: silencedEvents.name, dimensions: [("source", source)]).increment(by: outcome.record.silenced.count)
        }
        switch (outcome, accounting) {
        case (.succeeded(let record, _), .counted): sourceHealth(source, record.health, lastSuccess: now)
        case (.succeeded, .uncounted): Gauge(label: lastSuccess.name, dimensions: [("source", source)]).record(now.timeIntervalSince1970)
        // A failure that was recorded as one (not a poll cut short by shutdown or a state error).
        case (.failed(_, let record, _), .counted), (.authFailed(_, let record), .counted): sourceHealth(source, record.health, lastSuccess: nil)
        default: break
        }
    }

    /// A source's health (``SourceHealth/isFailing``: `tidings_source_up` 0); `lastSuccess`
    /// nil keeps that gauge as it was.
    package static func sourceHealth(_ source: String, _ health: SourceHealth, lastSuccess: Date?) {
        Gauge(label: sourceUp.name, dimensions: [("source", source)]).record(health.isFailing ? 0 : 1)
        if let lastSuccess {
            Gauge(label: Self.lastSuccess.name, dimensions: [("source", source)]).record(lastSuccess.timeIntervalSince1970)
        }
    }

    package static func delivered(sink: String, _ outcome: DeliveryOutcome, count: Int = 1) {
        Counter(label: deliveries.name, dimensions: [("sink", sink), ("outcome", outcome.rawValue)]).increment(by: count)
    }

    package static func prunedDeadLetters(_ bySink: [String: Int]) {
        for (sink, n) in bySink {
            Counter(label: deadLettersPruned.name, dimensions: [("sink", sink)]).increment(by: n)
        }
    }

    package static func late(seconds: Double) {
        CoreMetrics.Timer(label: lateness.name).record(max(0, seconds))
    }

    package static func behind(seconds: Double) {
        Gauge(label: behind.name).record(seconds)
    }

    package static func overrunning(_ polls: Int) {
        Gauge(label: pollsOverrunning.name).record(polls)
    }

    package static func started(version: String) {
        Gauge(label: buildInfo.name, dimensions: [("version", version)]).record(1)
    }

    /// Sinks whose outbox gauges are exported now.
    private static let backlogSinks = Mutex<Set<String>>([])

    /// Sets the outbox gauges: every sink in `backlog` (configured sinks with nothing queued
    /// included, as 0); sinks exported before but absent now stop being exported.
    package static func outbox(_ backlog: [String: OutboxBacklog]) {
        for (sink, b) in backlog {
            Gauge(label: outboxPending.name, dimensions: [("sink", sink)]).record(b.pending)
            Gauge(label: outboxHeld.name, dimensions: [("sink", sink)]).record(b.held)
            Gauge(label: outboxDead.name, dimensions: [("sink", sink)]).record(b.dead)
        }
        let gone = backlogSinks.withLock { exported in
            defer { exported = Set(backlog.keys) }
            return exported.subtracting(backlog.keys)
        }
        for sink in gone {
            Gauge(label: outboxPending.name, dimensions: [("sink", sink)]).destroy()
            Gauge(label: outboxHeld.name, dimensions: [("sink", sink)]).destroy()
            Gauge(label: outboxDead.name, dimensions: [("sink", sink)]).destroy()
        }
    }

    /// Sources a reload removed: their series stop being exported.
    package static func forget(sources: some Sequence<String>) {
        RecentPolls.shared.forget(sources)
        for source in sources {
            for outcome in PollLabel.allCases {
                Counter(label: polls.name, dimensions: [("source", source), ("outcome", outcome.rawValue)]).destroy()
            }
            for type in EventType.allCases {
                Counter(label: events.name, dimensions: [("source", source), ("type", type.rawValue)]).destroy()
            }
            Counter(label: silencedEvents.name, dimensions: [("source", source)]).destroy()
            Gauge(label: sourceUp.name, dimensions: [("source", source)]).destroy()
            Gauge(label: lastSuccess.name, dimensions: [("source", source)]).destroy()
        }
    }

    /// Sinks a reload removed: their delivery counters stop being exported (their outbox
    /// gauges follow the outbox, ``outbox(_:)``).
    package static func forget(sinks: some Sequence<String>) {
        for sink in sinks {
            for outcome in DeliveryOutcome.allCases {
                Counter(label: deliveries.name, dimensions: [("sink", sink), ("outcome", outcome.rawValue)]).destroy()
            }
            Counter(label: deadLettersPruned.name, dimensions: [("sink", sink)]).destroy()
        }
    }
}
