import FoundationEssentials
import TidingsPluginAPI

/// Enqueue / hold: each event's row (the history, with the silence that held it), then one
/// outbox row per (event, sink) as routed (``Enqueue``), all in the poll's batch.
struct EnqueueStage: PollStage {
    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws {
        try Self.insert(db, ctx.events, silenced: ctx.record.silenced, decisions: ctx.decisions, now: ctx.now)
        ctx.record.events = ctx.events
    }

    /// `silenced`: event id → the silence that holds it; `decisions`: event id → its deliveries.
    static func insert(_ db: any SQLConnection, _ events: [Event], silenced: [String: String], decisions: [String: [RouteDecision]], now: Date) throws {
        guard !events.isEmpty else { return }
        let batch = EventID.make(at: now)
        let insertEvent = "INSERT INTO event(id, source, kind, type, key, observed_at, payload, silenced_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq"
        for e in events {
            guard
                let seq: Int64 = try db.scalar(
                    insertEvent,
                    [
                        e.id.sqlValue, e.source.sqlValue, e.kind.sqlValue, e.event.rawValue.sqlValue, e.key.sqlValue, e.observedAt.sqlValue,
                        e.jsonLine().sqlValue, silenced[e.id].sqlValue,
                    ])
            else {
                throw SQLDecodingError(column: 0, value: .null, expected: "event seq")
            }
            guard let decisions = decisions[e.id] else { continue }
            try Enqueue.deliveries(db, eventSeq: seq, decisions, batch: batch, now: now)
        }
    }
}
