import FoundationEssentials
import TidingsPluginAPI

/// `tidings import opml FILE`: a feed reader's subscriptions as `feed` drafts. The outlines come
/// from the OPML parser beside the feed parser (TidingsProviders' `OPML`); this turns them into
/// drafts: the title is the name, the folders (or `category`) the `group`.
package struct OPMLReader: Sendable {
    /// One subscription as the parser read it: its title, `xmlUrl`, `htmlUrl`, the folders it
    /// sits in (outermost first) and its line.
    package typealias Subscription = (title: String, xmlURL: String?, htmlURL: String?, folders: [String], line: Int)

    package var fileName: String
    /// The interval of every imported source, when given (else the default).
    package var interval: String?

    package init(fileName: String, interval: String? = nil) {
        self.fileName = fileName
        self.interval = interval
    }

    package func read(_ subscriptions: [Subscription]) -> ImportReading {
        var reading = ImportReading()
        for s in subscriptions {
            let what = s.title.isEmpty ? (s.xmlURL ?? s.htmlURL ?? "outline") : s.title
            guard let url = s.xmlURL else {
                reading.notImportable.append(NotImportable(what: what, line: s.line, reason: "no xmlUrl: not a feed subscription"))
                continue
            }
            let lower = url.lowercased()
            guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
                reading.notImportable.append(NotImportable(what: what, line: s.line, reason: "xmlUrl \(url) is not an http or https address"))
                continue
            }
            var draft = SourceDraft(
                name: s.title.isEmpty ? SourceFileWriter.name(forURL: url) : s.title, provider: "feed", watchedURL: url)
            draft.comments.append("Imported from OPML (\(fileName), line \(s.line)\(s.title.isEmpty ? "" : ", \"\(s.title)\"")).")
            if let html = s.htmlURL { draft.comments.append("Its site: \(html)") }
            draft.setURL(url)
            if !s.folders.isEmpty { draft.options.append(SourceOption("group", .string(s.folders.joined(separator: "/")))) }
            if let interval { draft.options.append(SourceOption("interval", .string(interval))) }
            reading.drafts.append(draft)
        }
        return reading
    }
}
