import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// `tidings silence add|list|expire` (DESIGN §10, like `amtool silence`): silenced events are
/// recorded in history, marked with the silence's id, and not delivered.
struct SilenceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "silence",
        abstract: "Silence matching events for a while: add, list or expire silences.",
        discussion: """
            While a silence is active, every event that matches all of its matchers is recorded \
            (`tidings history` shows it as silenced, with the silence's id) but not delivered to \
            any sink. A silence ends by itself at its end time; `expire` ends it early. Matchers: \
            NAME=VALUE and NAME!=VALUE compare the whole field; NAME~=REGEX matches a regular \
            expression anywhere in it (not anchored: use ^…$, and (?i) to ignore case). NAME is \
            one of source, provider, kind, event, key, severity, title, body. The daemon reads \
            silences at each poll: no reload needed.
            """,
        subcommands: [Add.self, List.self, Expire.self],
        defaultSubcommand: List.self)

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Add a silence; prints its id.",
            discussion: """
                Examples: `tidings silence add source=helpdesk --for 2h --comment "migration"`, \
                `tidings silence add kind=alert 'title~=(?i)disk .* full' --until 07:30`.
                """)

        @OptionGroup var common: CommonOptions

        @Option(name: .customLong("for"), help: ArgumentHelp("How long it lasts from now (default 1h).", valueName: "duration"))
        var duration: String?

        @Option(help: ArgumentHelp("When it ends: an RFC 3339 time, or a local HH:MM (its next occurrence).", valueName: "time"))
        var until: String?

        @Option(help: "Why (shown by `silence list`).")
        var comment = ""

        @Option(help: ArgumentHelp("Who made it (default $USER@host).", valueName: "name"))
        var author: String?

        @Argument(help: ArgumentHelp("Conditions an event must all meet: NAME=VALUE, NAME!=VALUE or NAME~=REGEX.", valueName: "matcher"))
        var matchers: [String] = []

        func validate() throws {
            if matchers.isEmpty { throw ValidationError("give at least one matcher, e.g. source=helpdesk") }
            if duration != nil && until != nil { throw ValidationError("give --for or --until, not both") }
            _ = try parsedMatchers()
            _ = try end(from: Date())
        }

        func parsedMatchers() throws -> [SilenceMatcher] {
            do { return try matchers.map { text throws(SilenceMatcher.ParseError) in try SilenceMatcher(parsing: text) } } catch {
                throw ValidationError(error.description)
            }
        }

        func end(from now: Date) throws -> Date {
            let end: SilenceEnd
            if let until {
                end = .until(until)
            } else if let duration {
                do { end = .after(try DurationParser.seconds(duration)) } catch { throw ValidationError("--for: \(error)") }
            } else {
                end = .after(SilenceEnd.defaultDuration)
            }
            do { return try end.date(from: now) } catch { throw ValidationError(error.description) }
        }

        func run() async throws {
            let app = try App.load(common, logLevel: .warning, secrets: .lenient)
            let now = Date()
            let silence = try SilenceStore.add(
                app.openStore(), matchers: try parsedMatchers(), comment: comment, createdBy: author ?? Silence.defaultAuthor(),
                now: now, until: try end(from: now))
            emit(silence.id)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List active silences (the default).")

        @OptionGroup var common: CommonOptions

        @Flag(help: "Print one JSON object per silence.")
        var json = false

        @Flag(help: "List the silences that have ended instead.")
        var expired = false

        func run() async throws {
            let app = try App.load(common, logLevel: .warning, secrets: .lenient)
            let now = Date()
            let shown = try SilenceStore.all(app.openStore()).filter { ($0.state(at: now) == .expired) == expired }
            if json {
                for s in shown { emit(s.json(at: now).jsonString()) }
            } else if shown.isEmpty {
                emit(expired ? "no ended silences" : "no active silences")
            } else {
                for s in shown { emit(Self.text(s, now: now)) }
            }
        }

        /// Two or three lines: id, state and matchers; when, count and creator; the comment.
        static func text(_ s: Silence, now: Date) -> String {
            let time = { EventFormatter.localTime($0) }
            var out = "\(s.id)  \(s.state(at: now).rawValue)  " + s.matchers.map { TerminalText.line($0.description) }.joined(separator: " ")
            out +=
                "\n    \(time(s.startsAt)) until \(time(s.endsAt)), silenced \(s.silenced) event\(s.silenced == 1 ? "" : "s"), by \(TerminalText.line(s.createdBy))"
            if !s.comment.isEmpty { out += "\n    " + TerminalText.line(s.comment) }
            return out
        }
    }

    struct Expire: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "expire", abstract: "End a silence now.")

        @OptionGroup var common: CommonOptions

        @Argument(help: "The silence's id, or a unique prefix of it (at least 4 characters).")
        var id: String

        func run() async throws {
            let app = try App.load(common, logLevel: .warning, secrets: .lenient)
            do {
                let s = try SilenceStore.expire(app.openStore(), id: id)
                complain("expired silence \(s.id) (\(s.matchers.map(\.description).joined(separator: " ")))", level: .notice)
            } catch let e as SilenceStore.ExpireError {
                complain(e.description)
                for c in e.candidates { complain("  \(c.id)  \(c.matchers.map(\.description).joined(separator: " "))") }
                throw ExitCode(Exit.usage)
            }
        }
    }
}
