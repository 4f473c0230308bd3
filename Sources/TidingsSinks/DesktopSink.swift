import FoundationEssentials
import Logging
import Synchronization
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "desktop"`: freedesktop notifications through libnotify on the session bus.
///
/// Options: `timeout` (how long to wait for the notification server, default "10s"),
/// `expire_timeout` ("default", "never" or a duration; default "default"),
/// `expire_timeouts` (per kind, e.g. `{ alert = "30s" }`; `notice` defaults to "never";
/// critical events never expire), `info_urgency` ("normal" or "low"), `max_per_poll`
/// (default 5: more events from one poll of one source become one summary), `icon`,
/// `desktop_entry` (default "tidings"), `title_template` (the summary, plain text; default
/// `{{title}}`), `body_template` (default `{{body}}`; `{{x}}` escaped as body markup when the
/// server renders it, see ``MessageTemplate``). A digest (quiet hours, `group_wait`) is one
/// summary notification, as a burst is.
///
/// The bus is found from `DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus` (which is
/// where a systemd *user* unit finds it). Without a bus or a notification server, deliveries
/// fail as retryable ("desktop notifications unavailable: …", logged once per outage) and stay
/// in the outbox.
package final class DesktopSink: Sink, TemplatedSink {
    /// How events map to notifications (urgency, expiry, summaries).
    package let style: DesktopStyle
    /// How long one delivery waits for the notification server.
    package let timeout: TimeInterval
    private let logger: Logger
    /// libnotify is process-global and not thread-safe: every desktop sink (several may be
    /// configured, and a reload makes new ones) shares one thread and one client, which live
    /// as long as the process, so "Open" actions keep working across reloads.
    private static let thread = GLibThread(name: "tidings-desktop")
    private static let client = Libnotify(appName: "tidings")
    private var thread: GLibThread { Self.thread }
    private var client: Libnotify { Self.client }
    /// nil until the first attempt; false during an outage (so it is reported once).
    private let available = Mutex<Bool?>(nil)

    /// The "Snooze 1h" action, when the sink can write silences.
    private let snooze: DesktopSnooze?

    /// A desktop sink; `logger` gets the once-per-outage unavailable / available-again lines.
    /// With `silences`, single-item notifications offer "Snooze 1h" (if the server shows actions).
    package init(style: DesktopStyle, timeout: TimeInterval = 10, logger: Logger, silences: (any SilenceWriter)?) {
        self.style = style
        self.timeout = timeout
        self.logger = logger
        snooze = silences.map { DesktopSnooze(writer: $0, logger: logger) }
    }

    package convenience init(style: DesktopStyle, timeout: TimeInterval = 10, logger: Logger) {
        self.init(style: style, timeout: timeout, logger: logger, silences: nil)
    }

    package var templates: KeyValuePairs<String, MessageTemplate> {
        ["title_template": style.titleTemplate, "body_template": style.bodyTemplate]
    }

    /// One poll's events together, so a burst can become one summary.
    package var acceptsBatches: Bool { true }

    /// The factory the config loader uses.
    package static let factory = SinkFactory(type: "desktop", summary: "desktop notifications (libnotify, session D-Bus)") { o, setup in
        var style = DesktopStyle()
        func expiry(_ r: OptionReader, _ key: String) throws -> DesktopExpiry? {
            guard let text = try r.string(key) else { return nil }
            do { return try DesktopExpiry(parsing: text) } catch {
                throw r.error(key, "\(r.what): '\(key)' must be \"default\", \"never\" or a duration like \"10s\", not \"\(text)\"")
            }
        }
        if let e = try expiry(o, "expire_timeout") { style.expiry = e }
        if let kinds = try o.subtable("expire_timeouts") {
            for kind in kinds.table.keys { style.expiryByKind[kind] = try expiry(kinds, kind) }
        }
        if let u = try o.string("info_urgency") {
            guard let urgency = DesktopUrgency(rawValue: u), urgency != .critical else {
                throw o.error("info_urgency", "\(o.what): 'info_urgency' must be \"normal\" or \"low\", not \"\(u)\"")
            }
            style.infoUrgency = urgency
        }
        if let m = try o.int("max_per_poll", range: 1...1000) { style.maxPerPoll = m }
        style.icon = try o.string("icon")
        if let d = try o.string("desktop_entry") { style.desktopEntry = d }
        let templates = try MessageTemplate.options(
            o,
            [
                ("title_template", DesktopStyle.defaultTitle, .plain), ("body_template", DesktopStyle.defaultBody, .notification),
            ])
        (style.titleTemplate, style.bodyTemplate) = (templates[0], templates[1])
        return DesktopSink(style: style, timeout: try o.duration("timeout", minimum: 0.1) ?? 10, logger: setup.logger, silences: setup.silences)
    }

    /// Shows the poll's notifications; any failure (no bus, no server, a hung server) is retryable.
    package func deliver(_ events: [Event]) async throws {
        guard !events.isEmpty else { return }
        try await show { $0.notifications(for: events) }
    }

    /// A digest is one summary notification, as a burst from one poll is (DESIGN §10).
    package var rendersDigests: Bool { true }

    package func deliverDigest(_ digest: Digest) async throws {
        try await show { [$0.notification(for: digest)] }
    }

    /// Shows what `notifications` makes with the style (knowing whether the server renders body
    /// markup) on the libnotify thread, with "Snooze 1h" where the server has actions; any
    /// failure is retryable, an outage reported once.
    private func show(_ notifications: @escaping @Sendable (DesktopStyle) -> [DesktopNotification]) async throws {
        let (style, client, snooze) = (self.style, self.client, self.snooze)
        do {
            try await thread.perform(timeout: timeout) {
                var s = style
                let caps = try client.connect()
                s.bodyMarkup = caps.bodyMarkup
                for n in notifications(s) { try client.show(n, snooze: caps.actions ? snooze : nil) }
            }
        } catch {
            let message = "desktop notifications unavailable: \(error)"
            if available.withLock({ old in
                defer { old = false }
                return old != false
            }) {
                logger.warning("\(message); deliveries stay in the outbox and are retried")
            }
            throw DeliveryError(.retryable, message)
        }
        if available.withLock({ old in
            defer { old = true }
            return old == false
        }) {
            logger.notice("desktop notifications available again")
        }
    }

    /// Nothing to do: the shared thread keeps running (see above). Calling `notify_uninit`
    /// here would close every notification that still has an "Open" action, so a
    /// `check --deliver` would retract what it just showed.
    package func shutdown() async {}
}
