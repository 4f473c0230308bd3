import FoundationEssentials
import Glibc

/// A silence (DESIGN §10, like `amtool silence`): while it is active, events that match all of
/// its matchers are recorded in history (marked with its id) but not delivered.
package struct Silence: Sendable, Equatable {
    /// Short and random (``SilenceID``); `silence expire` takes a unique prefix of it.
    package var id: String
    /// All must match (an event is silenced when every matcher holds).
    package var matchers: [SilenceMatcher]
    package var comment: String
    /// `$USER@host` of whoever made it, or `--author`.
    package var createdBy: String
    package var createdAt: Date
    package var startsAt: Date
    package var endsAt: Date
    /// How many events it kept from their sinks.
    package var silenced: Int

    package init(
        id: String, matchers: [SilenceMatcher], comment: String, createdBy: String, createdAt: Date, startsAt: Date, endsAt: Date,
        silenced: Int = 0
    ) {
        self.id = id
        self.matchers = matchers
        self.comment = comment
        self.createdBy = createdBy
        self.createdAt = createdAt
        self.startsAt = startsAt
        self.endsAt = endsAt
        self.silenced = silenced
    }

    /// Where a silence is in its life at some time.
    package enum State: String, Sendable {
        /// Starts later.
        case pending
        case active
        /// Ended (ran out, or `silence expire`).
        case expired
    }

    package func state(at now: Date) -> State {
        now >= endsAt ? .expired : now < startsAt ? .pending : .active
    }

    /// Whether it silences `e` at `now`: active, and every matcher holds.
    package func silences(_ e: Event, at now: Date) -> Bool {
        state(at: now) == .active && matches(e)
    }

    /// Every matcher holds (regardless of time).
    package func matches(_ e: Event) -> Bool { matchers.allSatisfy { $0.matches(e) } }

    /// The `silence list --json` object, with its state at `now`.
    package func json(at now: Date) -> JSONValue {
        .object([
            "state": .string(state(at: now).rawValue),
            "id": .string(id), "matchers": .array(matchers.map(\.json)), "comment": .string(comment),
            "created_by": .string(createdBy), "created_at": .string(Timestamp.format(createdAt)),
            "starts_at": .string(Timestamp.format(startsAt)), "ends_at": .string(Timestamp.format(endsAt)),
            "silenced": .number(Double(silenced)),
        ])
    }

    /// The matchers of the silence a desktop "Snooze 1h" makes for the item of `e`
    /// (`source=S key=K`); nil for what is no item: a source's health events (kind `source`)
    /// and the one summary that stands for a poll over `max_events`.
    package static func snoozeMatchers(for e: Event) -> [SilenceMatcher]? {
        guard e.kind != "source", e.data["summary"] == nil || e.key != e.source else { return nil }
        // Free-text fields with `=`: these never fail to parse.
        return [try! SilenceMatcher(name: "source", op: .equal, value: e.source), try! SilenceMatcher(name: "key", op: .equal, value: e.key)]
    }
    package static let snoozeDuration: TimeInterval = 3600
    package static let snoozeComment = "snoozed from the desktop"

    /// Who makes a silence unless told (`--author`): `$USER@host`, as amtool records it.
    package static func defaultAuthor(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let user =
            environment["USER"].flatMap { $0.isEmpty ? nil : $0 }
            ?? getpwuid(geteuid()).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "uid \(geteuid())"
        var host = [UInt8](repeating: 0, count: 256)
        let named = host.withUnsafeMutableBufferPointer {
            gethostname(UnsafeMutableRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), $0.count - 1) == 0
        }
        let name = named ? String(decoding: host.prefix { $0 != 0 }, as: UTF8.self) : "localhost"
        return "\(user)@\(name)"
    }
}

/// When a silence made now ends: `--for D` or `--until T`.
package enum SilenceEnd: Sendable, Equatable {
    /// `--for 1h`: a duration from now.
    case after(TimeInterval)
    /// `--until 2026-11-23T18:00:00Z` or `--until 18:00`.
    case until(String)

    package struct ParseError: Error, CustomStringConvertible, Equatable {
        package var description: String
    }

    /// The default: an hour, as `amtool silence add` has it.
    package static let defaultDuration: TimeInterval = 3600

    /// The end time: a duration from `now`; an RFC 3339 time; or a local `HH:MM` (`HH:MM:SS`)
    /// taken as its next occurrence after `now` in `timeZone`. It must lie after `now`.
    package func date(from now: Date, timeZone: Zone = .current) throws(ParseError) -> Date {
        switch self {
        case .after(let seconds):
            guard seconds > 0 else { throw ParseError(description: "--for must be longer than 0s") }
            return now.addingTimeInterval(seconds)
        case .until(let text):
            if let time = QuietHours.TimeOfDay(text) {
                return Self.next(time, after: now, timeZone: timeZone)
            }
            guard let date = Timestamp.parse(text) else {
                throw ParseError(description: "--until '\(text)' is neither an RFC 3339 time (2026-11-23T18:00:00+01:00) nor a local HH:MM")
            }
            guard date > now else {
                throw ParseError(description: "--until \(text) is not in the future")
            }
            return date
        }
    }

    /// The first time after `now` at which the clock in `timeZone` shows `time` (tomorrow's when
    /// today's has passed; on a day whose clocks change, a time that does not exist is taken as
    /// the next one that does).
    static func next(_ time: QuietHours.TimeOfDay, after now: Date, timeZone: Zone) -> Date {
        let today = timeZone.civil(at: now)
        let day = CivilTime.days(year: today.year, month: today.month, day: today.day)
        for d in day...(day + 2) {
            let candidate = timeZone.date(of: CivilTime(seconds: d * 86_400 + Int64(time.seconds)))
            if candidate > now { return candidate }
        }
        return now.addingTimeInterval(86_400)
    }
}

/// Silence ids: 10 random lower-case Crockford base32 characters (50 bits), short enough to
/// type, and `silence expire` takes any unique prefix of at least ``minimumPrefix``.
package enum SilenceID {
    private static let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz")
    package static let length = 10
    package static let minimumPrefix = 4

    package static func make() -> String {
        var rng = SystemRandomNumberGenerator()
        var bits = rng.next()
        return String(
            (0..<length).map { _ in
                defer { bits >>= 5 }
                return alphabet[Int(bits & 31)]
            })
    }
}

/// How an event that a silence kept from its sinks is shown (`history`, `check`), defined once.
package enum SilenceMark {
    /// The event's JSON (DESIGN §4), plus `"silenced_by": "ID"` when a silence kept it back.
    package static func jsonLine(_ e: Event, silencedBy silence: String?) -> String {
        guard silence != nil else { return e.jsonLine() }
        return json(e, silencedBy: silence).jsonString()
    }

    /// ``jsonLine(_:silencedBy:)`` as a value, to go inside another object.
    package static func json(_ e: Event, silencedBy silence: String?) -> JSONValue {
        guard let silence, case .object(var members) = e.jsonObject else { return e.jsonObject }
        members["silenced_by"] = .string(silence)
        return .object(members)
    }
}

extension EventFormatter {
    /// ``line(_:)``, marked `[silenced by ID]` when a silence kept the event back.
    package func line(_ e: Event, silencedBy silence: String?) -> String {
        line(e) + (silence.map { "  [silenced by \(TerminalText.line($0))]" } ?? "")
    }
}
