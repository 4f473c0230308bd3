import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// Notification urgency (freedesktop `urgency` hint).
package enum DesktopUrgency: String, Sendable, Equatable {
    case low, normal, critical
}

/// When a notification closes by itself.
package enum DesktopExpiry: Sendable, Equatable {
    /// The notification server decides (`expire_timeout = -1`).
    case serverDefault
    /// Stays until the user dismisses it (`expire_timeout = 0`).
    case never
    case after(TimeInterval)

    /// `"default"`, `"never"` or a duration (`"10s"`).
    package init(parsing text: String) throws {
        switch text.lowercased() {
        case "default": self = .serverDefault
        case "never", "0", "0s": self = .never
        default: self = .after(try DurationParser.seconds(text))
        }
    }

    /// The D-Bus `expire_timeout` in milliseconds.
    package var milliseconds: Int32 {
        switch self {
        case .serverDefault: return -1
        case .never: return 0
        case .after(let s): return Int32(clamping: max(1, Int((s * 1000).rounded())))
        }
    }
}

/// One notification exactly as the desktop sink will send it.
package struct DesktopNotification: Sendable, Equatable {
    /// The notification's title (the event title, or "12 new messages from …").
    package var summary: String
    /// Markup-escaped (see ``DesktopStyle/escape(_:)``) unless the server lacks `body-markup`.
    package var body: String
    /// Icon name from the theme (`dialog-information` …).
    package var icon: String
    package var urgency: DesktopUrgency
    package var expiry: DesktopExpiry
    /// The `category` hint: `x-tidings.KIND`.
    package var category: String
    /// The `desktop-entry` hint.
    package var desktopEntry: String
    /// Opened with `xdg-open` by the "Open" action (http and https only).
    package var openURL: String?
    /// The matchers of the silence the "Snooze 1h" action makes (`source=S key=K`): only for
    /// one item's notification, nil for health events and summaries.
    package var snooze: [SilenceMatcher]? = nil
}

/// How events become notifications: urgency, expiry, icons, markup escaping and burst
/// summarising. Pure; the desktop sink feeds its output to libnotify.
package struct DesktopStyle: Sendable, Equatable {
    /// Urgency for `info` events: `normal` (default) or `low`.
    package var infoUrgency: DesktopUrgency = .normal
    /// Expiry for kinds without their own; `critical` events never expire regardless.
    package var expiry: DesktopExpiry = .serverDefault
    /// Per-kind expiry; notices stay until dismissed unless configured otherwise.
    package var expiryByKind: [String: DesktopExpiry] = ["notice": .never]
    /// More events than this from one poll of one source become one summary notification.
    package var maxPerPoll = 5
    /// Overrides the severity icons (`dialog-information`, `dialog-warning`, `dialog-error`).
    package var icon: String?
    /// The `desktop-entry` hint (a `tidings.desktop` file lets desktops group and configure these).
    package var desktopEntry = "tidings"
    /// Whether the server renders body markup (then the body must be escaped).
    package var bodyMarkup = true
    /// The notification's summary (`title_template`): plain text, as the specification has it.
    package var titleTemplate = MessageTemplate.builtin(Self.defaultTitle, markup: .plain)
    /// The notification's body (`body_template`), escaped as body markup (``Markup/notification``);
    /// ``body(for:)`` renders it as plain text for a server without `body-markup`.
    package var bodyTemplate = MessageTemplate.builtin(Self.defaultBody, markup: .notification) {
        didSet { plainBodyTemplate = bodyTemplate.with(markup: .plain) }
    }
    private var plainBodyTemplate = MessageTemplate.builtin(Self.defaultBody, markup: .plain)
    package static let defaultTitle = "{{title}}"
    package static let defaultBody = "{{body}}"

    /// The defaults: normal info urgency, server-default expiry, notices never expire, 5 per poll.
    package init() {}

    /// Escapes `&`, `<` and `>` so remote text cannot inject notification markup.
    package static func escape(_ text: String) -> String { Markup.notification.escape(text) }

    /// info → ``infoUrgency``, warning → normal, critical → critical.
    package func urgency(_ s: Severity) -> DesktopUrgency {
        switch s {
        case .info: return infoUrgency
        case .warning: return .normal
        case .critical: return .critical
        }
    }

    /// Critical never expires (desktops that honour urgency keep it anyway); then per kind; then the sink's.
    package func expiry(kind: String?, severity: Severity) -> DesktopExpiry {
        if severity == .critical { return .never }
        if let kind, let e = expiryByKind[kind] { return e }
        return expiry
    }

    func icon(_ s: Severity) -> String {
        if let icon { return icon }
        switch s {
        case .info: return "dialog-information"
        case .warning: return "dialog-warning"
        case .critical: return "dialog-error"
        }
    }

    func body(_ text: String) -> String { bodyMarkup ? Self.escape(text) : text }

    /// The body for `e`: `body_template` rendered, escaped for the server's markup (once).
    func body(for e: Event) -> String { (bodyMarkup ? bodyTemplate : plainBodyTemplate).render(e) }

    static func openable(_ url: String?) -> String? {
        guard let url, let scheme = URL(string: url)?.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return nil }
        return url
    }

    /// The notifications for one poll's events: one each, except that a source with more than
    /// ``maxPerPoll`` events gets one summary ("12 new messages from sportdate").
    package func notifications(for events: [Event]) -> [DesktopNotification] {
        var order: [String] = []
        var bySource: [String: [Event]] = [:]
        for e in events {
            if bySource[e.source] == nil { order.append(e.source) }
            bySource[e.source, default: []].append(e)
        }
        return order.flatMap { source -> [DesktopNotification] in
            let group = bySource[source]!
            return group.count > maxPerPoll ? [summary(of: group, source: source)] : group.map(single)
        }
    }

    /// The notification for one event.
    package func single(_ e: Event) -> DesktopNotification {
        DesktopNotification(
            summary: titleTemplate.render(e), body: body(for: e), icon: icon(e.severity), urgency: urgency(e.severity),
            expiry: expiry(kind: e.kind, severity: e.severity), category: "x-tidings.\(e.kind)",
            desktopEntry: desktopEntry, openURL: Self.openable(e.url), snooze: Silence.snoozeMatchers(for: e))
    }

    func summary(of events: [Event], source: String) -> DesktopNotification {
        let kinds = Set(events.map(\.kind))
        let types = Set(events.map(\.event))
        let kind = kinds.count == 1 ? kinds.first! : nil
        var title = "\(events.count) "
        if let t = types.first, types.count == 1, [.new, .changed, .removed].contains(t) { title += "\(t.rawValue) " }
        title += kind.map { $0.hasSuffix("s") ? $0 : $0 + "s" } ?? "events"
        title += " from \(source)"
        let urls = Set(events.map(\.url))
        return summary(
            title, lines: events.map { "• " + titleTemplate.render($0) }, events: events,
            openURL: urls.count == 1 ? Self.openable(urls.first!) : nil)
    }

    /// A digest (quiet hours, `group_wait`) as one summary notification, as a burst is: the
    /// digest's heading, a line per item (severity, title, what happened), the first
    /// ``summaryLines`` of them, "Open" only when the digest has one link.
    package func notification(for digest: Digest) -> DesktopNotification {
        let text = DigestText(digest, title: titleTemplate)
        return summary(text.heading, lines: text.plainLines(links: false).map { "• " + $0 }, events: digest.events, openURL: DigestText.soleLink(digest))
    }

    /// How many lines a summary shows before "…and N more".
    static let summaryLines = 5

    private func summary(_ title: String, lines: [String], events: [Event], openURL: String?) -> DesktopNotification {
        let kinds = Set(events.map(\.kind))
        let kind = kinds.count == 1 ? kinds.first! : nil
        let severity = events.map(\.severity).max() ?? .info
        return DesktopNotification(
            summary: title, body: body(DigestText.kept(lines, Self.summaryLines).joined(separator: "\n")), icon: icon(severity),
            urgency: urgency(severity), expiry: expiry(kind: kind, severity: severity), category: "x-tidings.\(kind ?? "summary")",
            desktopEntry: desktopEntry, openURL: openURL)
    }
}
