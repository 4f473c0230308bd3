import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// Shell completion of names from the configuration (`tidings check <TAB>` offers the
/// sources): the completion scripts call back into `tidings`, which loads the config the
/// command line being completed would load (its `--config`, else the usual lookup).
enum ConfigCompletion {
    static let sources = CompletionKind.custom { words, _, prefix in
        names(words: words, prefix: prefix) { $0.sources.map(\.name) }
    }

    static let sinks = CompletionKind.custom { words, _, prefix in
        names(words: words, prefix: prefix) { $0.sinks.map(\.name) }
    }

    /// The names `pick` takes from the config, those starting with `prefix`; none when the
    /// config cannot be loaded (completion must not print errors into the command line).
    static func names(words: [String], prefix: String, _ pick: (TidingsConfig) -> [String]) -> [String] {
        Log.bootstrap(level: .critical)
        var loader = App.loader
        loader.secrets = .lenient
        guard let config = try? loader.load(file: ConfigLoader.locate(explicit: configOption(in: words))) else { return [] }
        return pick(config).filter { $0.hasPrefix(prefix) }.sorted()
    }

    /// The value of `--config PATH` or `--config=PATH` among the shell words (which arrive as
    /// typed: quotes are removed here, escapes are not interpreted).
    static func configOption(in words: [String]) -> String? {
        var value: String?
        for (i, word) in words.enumerated() {
            if word == "--config", i + 1 < words.count {
                value = words[i + 1]
            } else if word.hasPrefix("--config=") {
                value = String(word.dropFirst("--config=".count))
            }
        }
        return value.map { TextEdits.trimming($0, ["'", "\""]) }
    }
}
