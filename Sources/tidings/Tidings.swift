import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

@main
struct Tidings: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tidings",
        abstract: "Poll the services you care about and get told when something changes.",
        discussion: """
            tidings polls sources (feeds, web pages, IMAP mailboxes, TLS certificates, GitHub, JSON \
            APIs, Alertmanager, scripts in plugins.d) on a schedule, remembers what it has seen, and \
            sends what is new, changed or removed to sinks: desktop notifications, stdout, webhooks, \
            commands (exec), ntfy, Gotify, Pushover, Telegram, Slack, Discord, email, Matrix and \
            Apprise.

            --config, --state-dir, -v and -q may be given before or after the subcommand. The \
            configuration file is described in tidings.toml(5).

            Exit status: 0 success and nothing new, 1 success with new events, 2 a source or \
            sink failed, 64 usage error, 78 configuration error.
            """,
        version: TidingsVersion.string,
        subcommands: [
            RunCommand.self, CheckCommand.self, AddCommand.self, StatusCommand.self, SourcesCommand.self, HistoryCommand.self,
            ConfigCommand.self, StateCommand.self, SinksCommand.self, OutboxCommand.self, NoticesCommand.self,
            ItemsCommand.self, SilenceCommand.self, ImportCommand.self, ExportCommand.self,
        ]
    )

    /// `tidings --version` alone is answered before the argument parser builds its tree of every
    /// command (each one's configuration, metadata and witness tables: pages of code touched for
    /// nothing, issue 31); the same text as the parser's `--version`. Anything else is parsed.
    static func main() async {
        if CommandLine.arguments.dropFirst().elementsEqual(["--version"]) {
            StandardStreams.write(TidingsVersion.string + "\n", to: STDOUT_FILENO)
            return
        }
        await main(nil)
    }

    /// Parsed here so that they may come before the subcommand; see ``CommonOptions``.
    @OptionGroup var common: CommonOptions

    /// Bare `tidings` (or only options): the usage on stderr, exit 64 (a usage error, like
    /// a missing subcommand in git or systemctl); `tidings --help` prints it on stdout.
    func run() async throws {
        StandardStreams.write(Self.helpMessage() + "\n", to: STDERR_FILENO)
        throw ExitCode(Exit.usage)
    }
}
