import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// The text of a phone push (ntfy, Gotify, Pushover): the sink's `title_template` (default
/// `{{title}}`) and `body_template` (default `{{body}}`) rendered as plain text, and cut to the
/// channel's limits.
///
/// These apps show text as it is (no markup is switched on), so nothing needs escaping, and a
/// remote `<b>` or `**` is shown, not obeyed. All three require a message: when the body renders
/// blank (most events have only a title), the title becomes the message and no separate title is
/// sent, so the app shows its own name or the topic above it instead of the same line twice.
package struct PushText: Sendable {
    /// What one event becomes.
    package struct Rendered: Sendable, Equatable {
        /// Nil when the title became the message.
        package var title: String?
        /// Never empty.
        package var message: String
    }

    package var title: MessageTemplate
    package var body: MessageTemplate

    package init(title: MessageTemplate, body: MessageTemplate) {
        self.title = title
        self.body = body
    }

    /// Reads `title_template` and `body_template`.
    package static func options(_ o: OptionReader) throws -> PushText {
        PushText(
            title: try MessageTemplate.option(o, "title_template", default: "{{title}}", markup: .plain),
            body: try MessageTemplate.option(o, "body_template", default: "{{body}}", markup: .plain))
    }

    /// The title and message for `e`, each cut to its limit.
    package func render(_ e: Event, title titleLimit: LengthLimit, message messageLimit: LengthLimit) -> Rendered {
        let title = self.title.render(e)
        let body = self.body.render(e)
        if !Self.isBlank(body) {
            return Rendered(title: Self.isBlank(title) ? nil : titleLimit.cut(title), message: messageLimit.cut(body))
        }
        // A message is required: the title, else the event's own title, else its key (never empty).
        let message = [title, e.title, e.key].first { !Self.isBlank($0) } ?? "\(e.source): \(e.event.rawValue)"
        return Rendered(title: nil, message: messageLimit.cut(message))
    }

    /// What a digest becomes: the digest's heading as the title, one line per item as the
    /// message (``DigestText/plainLines``, each title from `title_template`), as many lines as
    /// fit in `messageLimit`.
    package func render(_ digest: Digest, title titleLimit: LengthLimit, message messageLimit: LengthLimit) -> Rendered {
        let text = DigestText(digest, title: title)
        let lines = DigestText.fit(text.plainLines) { messageLimit.fits($0.joined(separator: "\n")) }
        return Rendered(title: titleLimit.cut(text.heading), message: messageLimit.cut(lines.joined(separator: "\n")))
    }

    /// A digest's tap action: its one link (``DigestText/soleLink``), whole.
    package static func link(_ digest: Digest, limit: LengthLimit) -> String? {
        guard let url = DigestText.soleLink(digest), limit.fits(url) else { return nil }
        return url
    }

    /// The event's URL as the notification's tap action: http(s) only (a remote `javascript:`
    /// or app-intent URL never becomes something a tap opens), and whole: a URL over `limit`
    /// is left out, as a cut one would lead somewhere else.
    package static func link(_ e: Event, limit: LengthLimit) -> String? {
        guard let url = DesktopStyle.openable(e.url), limit.fits(url) else { return nil }
        return url
    }

    private static func isBlank(_ s: String) -> Bool { s.allSatisfy(\.isWhitespace) }
}
