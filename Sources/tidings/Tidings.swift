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
        do {
            var command = try await asyncParseAsRoot(nil)
            if var asynchronous = command as? AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
            finish(0)
        } catch let code as ExitCode {
            finish(code.rawValue)
        } catch {
            exit(withError: error)
        }
    }

    /// Ends the process once its command has run, with stdio flushed but without `exit(3)`'s
    /// atexit handlers and library destructors, as ArgumentParser's `main` would end it
    /// otherwise, and without the usage text that ArgumentParser builds for every error it
    /// ends with, an `ExitCode` included (and then does not print). Issue 31: at the end of a
    /// `check` of 200 sources they faulted in ≈ 5 MiB of code (the argument tree of every
    /// command, OpenSSL's, GnuTLS's and Kerberos's clean-up of what the process is about to
    /// drop anyway): benchmark 1's peak RSS was reached there, after the polls. Nothing of
    /// tidings runs at exit: the state is committed and the lock released by the kernel, as
    /// when a command is killed.
    static func finish(_ status: Int32) -> Never {
        fflush(nil)
        _exit(status)
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
