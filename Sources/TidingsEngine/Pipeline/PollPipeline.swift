import FoundationEssentials
import TidingsPluginAPI

/// One stage of a poll's pipeline: it reads what the earlier stages left in the context,
/// adds to it, and writes its own rows, inside the poll's one transaction.
protocol PollStage {
    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws
}

/// DESIGN §1 between "the provider answered" and "commit": the stages of one poll, built in
/// one place (``build(_:)``) and run in order inside ONE transaction (``PollRecorder``). A
/// crash at any point leaves either all of the poll or none of it.
struct PollPipeline {
    let stages: [any PollStage]

    /// The whole pipeline of a poll recorded with `options`.
    static func build(_ options: RecordOptions) -> PollPipeline {
        var stages: [any PollStage] = [
            IntakeStage(),  // items bounded: what does not fit is cut, with a marker
            DedupeStage(),  // new / changed / removed against the stored items; baseline
            EventsStage(),  // the event of each change, or one summary over max_events
            NoticeStage(),  // kind `notice` kept pending until dismissed
            HealthStage(),  // failures, `error` / `recovered`, auth-failed, next due
        ]
        if let router = options.router, options.remindsOfItems {
            stages.append(ReminderStage(router: router))  // repeat_interval reminders
        }
        stages.append(SilenceStage())  // active silences keep events from the sinks
        if let router = options.router {
            stages.append(RouteStage(router: router))  // first matching rule, quiet hours, group_wait
        }
        stages += [
            EnqueueStage(),  // event rows (history); one outbox row per (event, sink), sent or held
            SourceStateStage(),  // the source_state row, written once
        ]
        return PollPipeline(stages: stages)
    }

    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws {
        for stage in stages { try stage.run(&ctx, db) }
    }
}

/// What one poll's stages share: the provider's answer, the source's row as read at the poll's
/// start (and as the poll leaves it), and what each stage made.
struct PollRecording {
    /// What the provider said.
    enum Answer: Sendable {
        /// Its items (or 304); `nextDue`, when given, is stored with the poll.
        case success(PollResult, nextDue: Date?)
        /// It failed; `notBefore`: the earliest time the server allowed (Retry-After);
        /// `nextDue`: when to poll again after so many failures in a row.
        case failure(PollError, notBefore: Date?, nextDue: @Sendable (Int) -> Date?)
    }

    let source: SourceConfig
    let answer: Answer
    let now: Date
    let options: RecordOptions
    /// The row as read at the poll's start (nil: none yet), for the write's guard.
    let read: SourceState?
    /// The row as this poll leaves it: read, then changed by the stages, written by the last.
    var state: SourceState

    /// Intake: the items as stored (cut to size), nil for a failure or a 304.
    var intake: ItemIntake.Result?
    /// Dedupe: the stored items before this poll, and what changed.
    var previous: [String: StoredItem] = [:]
    var dedupe: Deduplicator.Outcome?
    /// Events: one per change (false) or one summary over `max_events` (true).
    var summarized = false
    /// The poll's events, in the order they are inserted.
    var events: [Event] = []
    /// Event id → the only routes the event goes through (reminders).
    var through: [String: Set<String>] = [:]
    /// Route: event id → where it goes (events a silence holds have none).
    var decisions: [String: [RouteDecision]] = [:]
    /// What the caller gets back.
    var record = PollRecord()

    init(source: SourceConfig, answer: Answer, now: Date, options: RecordOptions, read: SourceState?) {
        self.source = source
        self.answer = answer
        self.now = now
        self.options = options
        self.read = read
        self.state = read ?? SourceState(provider: source.provider)
        state.provider = source.provider
    }

    /// The event of one change (first seen as stored, or now).
    func event(_ change: Deduplicator.Change) -> Event {
        EventFactory.event(source: source, change: change, firstSeen: previous[change.item.key]?.firstSeen ?? now, now: now)
    }
}
