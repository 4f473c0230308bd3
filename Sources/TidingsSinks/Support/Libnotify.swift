import CLibnotify
import FoundationEssentials

/// libnotify, used only from the desktop sink's ``GLibThread``.
///
/// It holds its own reference to the session-bus connection with exit-on-close turned off:
/// GIO's default would raise SIGTERM in the daemon when the bus goes away. After any
/// failure it drops libnotify's cached proxy (`notify_uninit`) so the next call reconnects.
final class Libnotify: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// What the notification server says it can do (`GetCapabilities`).
    struct Capabilities: Sendable, Equatable {
        /// It renders body markup (then the body must be escaped).
        var bodyMarkup: Bool
        /// It shows action buttons ("Snooze 1h" is offered only then).
        var actions: Bool
    }

    private let appName: String
    private var bus: OpaquePointer?
    private var capabilities: Capabilities?

    init(appName: String) { self.appName = appName }

    /// Connects if needed; returns what the server can do.
    func connect() throws -> Capabilities {
        if let bus, tidings_g_dbus_connection_is_closed(bus) != 0 { reset() }  // the bus went away (re-login, restart)
        if let capabilities, bus != nil { return capabilities }
        var error: UnsafeMutablePointer<GError>?
        guard let connection = tidings_g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else {
            throw Failure(description: Self.take(error, or: "no session bus"))
        }
        tidings_g_dbus_connection_set_exit_on_close(connection, 0)
        bus = connection
        if tidings_notify_is_initted() == 0 { _ = tidings_notify_init(appName) }
        // Without an answer, assume markup (escaping is then the safe side) and no actions.
        var caps = Capabilities(bodyMarkup: true, actions: false)
        if let list = tidings_notify_get_server_caps() {
            var names: Set<String> = []
            var node: UnsafeMutablePointer<GList>? = list
            while let n = node {
                if let p = n.pointee.data { names.insert(String(cString: p.assumingMemoryBound(to: CChar.self))) }
                node = n.pointee.next
            }
            tidings_g_list_free_full(list, tidings_g_free)
            caps = Capabilities(bodyMarkup: names.contains("body-markup"), actions: names.contains("actions"))
        }
        capabilities = caps
        return caps
    }

    /// Shows one notification (a synchronous D-Bus call). `snooze`: offer "Snooze 1h" (when
    /// the notification has an item to snooze).
    func show(_ n: DesktopNotification, snooze: DesktopSnooze? = nil) throws {
        guard let note = tidings_notify_notification_new(n.summary, n.body, n.icon) else {
            throw Failure(description: "notify_notification_new failed")
        }
        tidings_notify_notification_set_app_name(note, appName)
        tidings_notify_notification_set_urgency(note, n.urgency == .critical ? NOTIFY_URGENCY_CRITICAL : n.urgency == .low ? NOTIFY_URGENCY_LOW : NOTIFY_URGENCY_NORMAL)
        tidings_notify_notification_set_timeout(note, n.expiry.milliseconds)
        tidings_notify_notification_set_category(note, n.category)
        tidings_notify_notification_set_hint(note, "desktop-entry", tidings_g_variant_new_string(n.desktopEntry))
        var actions: [Action] = []
        if let url = n.openURL {
            let box = URLBox(url)
            actions += ["default", "open"].map { Action(id: $0, label: "Open") { box.open() } }
        }
        if let snooze, let matchers = n.snooze {
            actions.append(Action(id: "snooze", label: DesktopSnooze.label) { snooze.snooze(matchers) })
        }
        for action in actions {
            tidings_notify_notification_add_action(
                note, action.id, action.label,
                { _, _, data in
                    guard let data else { return }
                    Unmanaged<Action>.fromOpaque(data).takeUnretainedValue().run()
                }, Unmanaged.passRetained(action).toOpaque(),
                { data in
                    if let data { Unmanaged<Action>.fromOpaque(data).release() }
                })
        }
        var error: UnsafeMutablePointer<GError>?
        guard tidings_notify_notification_show(note, &error) != 0 else {
            tidings_g_object_unref(note)
            reset()
            throw Failure(description: Self.take(error, or: "Notify failed"))
        }
        if !actions.isEmpty {
            // Keep the notification (and its action callbacks) alive until the server closes it.
            let closed: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { object, _ in
                if let object { tidings_g_object_unref(object) }
            }
            tidings_g_signal_connect_data(note, "closed", unsafeBitCast(closed, to: GCallback.self), nil, nil, GConnectFlags(0))
        } else {
            tidings_g_object_unref(note)
        }
    }

    /// Forgets the connection so the next call starts afresh (after a failure). Note that
    /// `notify_uninit` closes the notifications that still have actions.
    func reset() {
        if tidings_notify_is_initted() != 0 { tidings_notify_uninit() }
        if let bus { tidings_g_object_unref(UnsafeMutableRawPointer(bus)) }
        bus = nil
        capabilities = nil
    }

    private static func take(_ error: UnsafeMutablePointer<GError>?, or fallback: String) -> String {
        guard let error else { return fallback }
        defer { tidings_g_error_free(error) }
        var text = error.pointee.message.map { String(cString: $0) } ?? fallback
        // GDBus prefixes remote errors with "GDBus.Error:org.freedesktop…: "; keep the human part.
        if text.hasPrefix("GDBus.Error:"), let colon = text.firstRange(of: ": ") { text = String(text[colon.upperBound...]) }
        return text
    }
}

/// An action button: its id (what the server reports back), its label and what it does. Kept
/// alive as libnotify's user data while its notification is.
private final class Action {
    let id: String
    let label: String
    let run: @Sendable () -> Void
    init(id: String, label: String, run: @escaping @Sendable () -> Void) {
        (self.id, self.label, self.run) = (id, label, run)
    }
}

/// The URL an "Open" action opens, with `xdg-open` (spawned detached; GLib reaps it).
private final class URLBox: Sendable {
    let url: String
    init(_ url: String) { self.url = url }

    func open() {
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("xdg-open"), strdup(url), nil]
        defer { argv.forEach { free($0) } }
        var error: UnsafeMutablePointer<GError>?
        if tidings_g_spawn_async(nil, &argv, nil, G_SPAWN_SEARCH_PATH, nil, nil, nil, &error) == 0, let error {
            tidings_g_error_free(error)
        }
    }
}
