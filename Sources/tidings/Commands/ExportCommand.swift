import ArgumentParser
import FoundationEssentials
import TidingsApp
import TidingsEngine
import TidingsPluginAPI
import TidingsProviders

/// `tidings export opml` (DESIGN §14): every feed source as OPML 2.0 on stdout.
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write every feed source as OPML 2.0 on stdout, for a feed reader to import.",
        discussion: """
            Each feed source is an outline (the source's name as its title, its url as xmlUrl); \
            sources with a group sit in a folder of that name, with category="/GROUP". A feed \
            whose url is a secret (url_file) is left out, with a note on stderr.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case opml
    }

    @OptionGroup var common: CommonOptions

    @Argument(help: "opml")
    var format: Format

    func run() async throws {
        let app = try App.load(common, logLevel: .warning, secrets: .lenient)
        var feeds: [OPML.Feed] = []
        for s in app.config.sources where s.provider == "feed" {
            guard let feed = s.instance as? FeedProvider else { continue }
            if feed.urlIsSecret {
                complain("\(s.name): not exported: its url is a secret (url_file)", level: .warning)
                continue
            }
            feeds.append(OPML.Feed(title: s.name, xmlURL: feed.url.absoluteString, group: s.settings.group))
        }
        print(OPML.document(feeds), terminator: "")
    }
}
