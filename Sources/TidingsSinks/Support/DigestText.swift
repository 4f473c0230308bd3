import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// How a ``Digest`` reads in every channel that shows one as one message (DESIGN §10): a heading
/// (``Digest/title``: "3 events from helpdesk (held for quiet hours)"), then one line per item:
/// its severity, its title (the sink's title template, so escaped for the channel's markup),
/// what happened to it (`new`, `came and went`, `new, then changed (3 events)`) and its link.
///
/// The channels differ only in how a line is marked up (``plainLines``, ``htmlLines``,
/// ``markedLines(_:link:)``) and how much fits: ``fit(_:_:)`` leaves out whole lines at the end
/// and says how many ("…and 12 more"), so a digest over a channel's limit never ends inside a
/// line's markup.
package struct DigestText: Sendable, Equatable {
    /// One item, its parts not yet marked up.
    package struct Line: Sendable, Equatable {
        package var severity: Severity
        /// The item's title as the sink's title template renders it (in that template's markup).
        package var title: String
        /// What happened to the item while the digest was collected (``Digest/Entry/summaryText``).
        package var what: String
        /// The item's link: http(s) only (a remote `javascript:` URL is never linked), as given.
        package var link: String?
    }

    /// ``Digest/title``: our own words and source names, never remote text.
    package var heading: String
    /// The highest severity of any event in the digest.
    package var severity: Severity
    package var lines: [Line]

    /// The text of `digest`, each item's title rendered with `title` (the sink's `title_template`,
    /// compiled for the markup the lines are written in).
    package init(_ digest: Digest, title: MessageTemplate) {
        heading = digest.title
        severity = digest.severity
        lines = digest.entries.map { entry in
            Line(severity: entry.severity, title: title.render(entry.latest), what: entry.summaryText, link: DesktopStyle.openable(entry.latest.url))
        }
    }

    /// The one link the whole message may open (ntfy's Click, Pushover's url, the desktop's
    /// "Open"): only when every item that has a link has the same one.
    package static func soleLink(_ digest: Digest) -> String? {
        let links = Set(digest.entries.compactMap { DesktopStyle.openable($0.latest.url) })
        return links.count == 1 ? links.first : nil
    }

    /// `[warning] Disk full (came and went) https://example.org/a`: for plain-text channels
    /// (e-mail text, phone pushes, Matrix `body`) with a plain title template.
    package var plainLines: [String] { plainLines(links: true) }

    /// ``plainLines``, without the links when `links` is false (a desktop notification's body
    /// cannot open them).
    package func plainLines(links: Bool) -> [String] {
        lines.map { l in "[\(l.severity.rawValue)] \(l.title) (\(l.what))" + (links ? l.link.map { " " + $0 } ?? "" : "") }
    }

    /// `⚠️ <a href="https://example.org/a">Disk full</a> (came and went)`: for HTML channels
    /// (Telegram, Matrix `formatted_body`, e-mail HTML) with an HTML-escaping title template.
    package var htmlLines: [String] {
        markedLines(.html) { url, title in "<a href=\"\(Markup.html.escape(url))\">\(title)</a>" }
    }

    /// The severity's mark, the title (escaped for `markup` by the title template) linked as
    /// `link(url, title)` writes a link in the channel's markup, and what happened: the lines
    /// of a chat channel.
    package func markedLines(_ markup: Markup, link: (_ url: String, _ title: String) -> String) -> [String] {
        lines.map { l in "\(ChatChannel.emoji(l.severity)) \(l.link.map { link($0, l.title) } ?? l.title) (\(markup.escape(l.what)))" }
    }

    /// A chat message: `head` (if any), then as many of `lines` as fit in `limit` as the
    /// channel counts (`syntax`), one per line, and cut to it should one line alone be too long.
    package static func message(head: String?, lines: [String], limit: Int, syntax: MarkupCutter.Syntax) -> String {
        func text(_ lines: [String]) -> String { ((head.map { [$0] } ?? []) + lines).joined(separator: "\n") }
        let kept = fit(lines) { MarkupCutter.width(text($0), syntax: syntax) <= limit }
        return MarkupCutter.cut(text(kept), limit: limit, syntax: syntax)
    }

    /// The last line when some are left out.
    package static func more(_ n: Int) -> String { "…and \(n) more" }

    /// The first `shown` of `lines`, the others counted in a last line ("…and 12 more").
    package static func kept(_ lines: [String], _ shown: Int) -> [String] {
        shown >= lines.count ? lines : Array(lines.prefix(shown)) + [more(lines.count - shown)]
    }

    /// How many of `count` lines to show: all when `fits(count)`, else the most that `fits` takes
    /// (with the line counting the rest, see ``kept(_:_:)``), and at least one (a line too long
    /// on its own is left to the channel's cutter).
    package static func shown(_ count: Int, _ fits: (Int) -> Bool) -> Int {
        guard count > 1, !fits(count) else { return count }
        // Fewer lines never take more room, so the largest count that fits is found by bisection.
        var (low, high) = (1, count - 1)
        while low < high {
            let mid = (low + high + 1) / 2
            if fits(mid) { low = mid } else { high = mid - 1 }
        }
        return low
    }

    /// ``kept(_:_:)`` as many of `lines` as `fits` takes.
    package static func fit(_ lines: [String], _ fits: ([String]) -> Bool) -> [String] {
        kept(lines, shown(lines.count) { fits(kept(lines, $0)) })
    }
}
