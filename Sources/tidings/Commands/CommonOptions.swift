import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// Options every subcommand takes, before or after the subcommand's name
/// (`tidings --config X sources` = `tidings sources --config X`).
///
/// The root command declares them too: swift-argument-parser parses the root's options from
/// the whole command line and hands the same decoded value to a subcommand's
/// `@OptionGroup var common: CommonOptions` (an option group of one type is decoded once).
struct CommonOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Main config file. Default: $TIDINGS_CONFIG, else ~/.config/tidings/tidings.toml, else /etc/tidings/tidings.toml.", valueName: "path"),
        completion: .file(extensions: ["toml"]))
    var config: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Where the state database lives. Default: $TIDINGS_STATE_DIR, else state_dir from the config, else ~/.local/state/tidings.", valueName: "dir"),
        completion: .directory)
    var stateDir: String?

    @Flag(name: .shortAndLong, help: "Log more (debug detail) on stderr.")
    var verbose = false

    @Flag(name: .shortAndLong, help: "Log only errors on stderr.")
    var quiet = false

    func logLevel(default level: Logger.Level) -> Logger.Level {
        verbose ? .debug : quiet ? .error : level
    }
}

/// Exit statuses (DESIGN §5, like diff(1)).
enum Exit {
    static let nothingNew: Int32 = 0
    static let newEvents: Int32 = 1
    /// `tidings status`: the state needs attention (a failing source, a dead letter, no daemon).
    static let attention: Int32 = 1
    static let failure: Int32 = 2
    static let usage: Int32 = 64
    static let config: Int32 = 78
}

/// Prints a diagnostic on stderr (never stdout: stdout carries only results), one line:
/// secrets scrubbed, and remote text it may quote (an error body, a title) escaped. Under
/// journald it carries `level`'s priority, as log lines do.
func complain(_ message: String, level: Logger.Level = .error) {
    let priority = Log.stderrDestination == .journal ? LogDestination.priority(level) : ""
    StandardStreams.write(priority + "tidings: " + TerminalText.line(Redactor.shared.scrub(message)) + "\n", to: STDERR_FILENO)
}

/// Writes results on stdout.
func emit(_ line: String) {
    StandardStreams.write(line + "\n", to: STDOUT_FILENO)
}
