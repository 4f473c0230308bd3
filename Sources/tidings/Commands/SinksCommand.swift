import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite
import TidingsSinks

struct SinksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sinks",
        abstract: "Work with sinks.",
        subcommands: [Test.self])

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "test",
            abstract: "Send a clearly marked test event through one sink now, and report the result (exit 0 or 2).",
            discussion: "The event goes through the sink's templates; what each renders is shown first.")

        @OptionGroup var common: CommonOptions

        @Argument(help: "The sink's name ([sinks.NAME]).", completion: ConfigCompletion.sinks)
        var name: String

        func run() async throws {
            let app = try App.load(common, logLevel: .warning)
            guard let sink = app.config.sink(named: name) else {
                complain("no sink named '\(name)' (configured: \(app.config.sinks.map(\.name).joined(separator: ", ")))")
                throw ExitCode(Exit.usage)
            }
            let event = Event(
                source: "tidings", provider: "tidings", kind: "test", event: .new, key: "test",
                title: "tidings test event (sink \(name))", body: "If you can read this, the sink '\(name)' works.",
                url: nil, severity: .info, observedAt: Date(), data: ["test": true])
            if let templated = sink.instance as? any TemplatedSink {
                for (option, template) in templated.templates {
                    complain("sink \(name) (\(sink.type)): \(option) renders \(Self.shown(template.render(event)))", level: .info)
                }
            }
            do {
                try await sink.instance.deliver([event])
                await sink.instance.shutdown()
                complain("sink \(name) (\(sink.type)): test event \(event.id) delivered")
            } catch {
                await sink.instance.shutdown()
                var what = ""
                if let de = error as? DeliveryError {
                    switch de.category {
                    case .retryable: what = " (the daemon would retry this delivery)"
                    case .permanent: what = " (the daemon would not retry: a dead letter)"
                    case .gone: what = " (the daemon would disable this sink until reload)"
                    }
                }
                complain("sink \(name) (\(sink.type)) failed: \(error)\(what)")
                throw ExitCode(Exit.failure)
            }
        }

        /// A rendering as one quoted line (``complain`` escapes it and scrubs secrets), cut for the terminal.
        static func shown(_ text: String) -> String {
            "\"" + TextEdits.replacing("\n", with: "\\n", in: text.cut(utf8Bytes: 2000)) + "\""
        }
    }
}
