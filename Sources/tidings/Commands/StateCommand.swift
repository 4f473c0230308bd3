import ArgumentParser
import Foundation
import TidingsCore

struct StateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "state",
        abstract: "Work with the stored state.",
        subcommands: [Forget.self])

    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "forget",
            abstract: "Drop what tidings remembers about a source; its next poll is a silent baseline.")

        @OptionGroup var common: CommonOptions

        @Argument(help: "The source to forget.", completion: ConfigCompletion.sources)
        var source: String

        func run() async throws {
            let app = try App.load(common, logLevel: .warning, secrets: .lenient)
            let n = try app.openStore().forget(source: source)
            if app.config.source(named: source) == nil {
                complain("note: '\(source)' is not a configured source", level: .notice)
            }
            emit("forgot \(n) item\(n == 1 ? "" : "s") of \(source); its next poll is a baseline")
        }
    }
}
