import ArgumentParser
import Foundation
import TidingsCore

struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Work with the configuration.",
        subcommands: [Check.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Validate the configuration and plugins.d; errors print as FILE:LINE: message (exit 78).")

        @OptionGroup var common: CommonOptions

        func run() async throws {
            let app = try App.load(common, logLevel: .warning)
            let c = app.config
            let enabled = c.sources.filter { $0.settings.enabled }.count
            emit("\(app.configFile): OK: \(c.sources.count) source\(c.sources.count == 1 ? "" : "s") (\(enabled) enabled), \(c.sinks.count) sink\(c.sinks.count == 1 ? "" : "s"), \(c.routes.count) route\(c.routes.count == 1 ? "" : "s"); plugins from \(c.pluginsDir)")
        }
    }
}
