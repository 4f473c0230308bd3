import CLibnotify
import Foundation

/// libnotify, used only from the desktop sink's ``GLibThread``.
///
/// It holds its own reference to the session-bus connection with exit-on-close turned off:
/// GIO's default would raise SIGTERM in the daemon when the bus goes away. After any
/// failure it drops libnotify's cached proxy (`notify_uninit`) so the next call reconnects.
final class Libnotify: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let appName: String
    private var bus: OpaquePointer?
    private var bodyMarkup: Bool?

    init(appName: String) { self.appName = appName }

    /// Connects if needed; returns whether the server renders body markup.
    func connect() throws -> Bool {
        if let bus, g_dbus_connection_is_closed(bus) != 0 { reset() }  // the bus went away (re-login, restart)
        if let bodyMarkup, bus != nil { return bodyMarkup }
        var error: UnsafeMutablePointer<GError>?
        guard let connection = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else {
            throw Failure(description: Self.take(error, or: "no session bus"))
        }
        g_dbus_connection_set_exit_on_close(connection, 0)
        bus = connection
        if notify_is_initted() == 0 { _ = notify_init(appName) }
        var markup = true
        if let caps = notify_get_server_caps() {
            markup = false
            var node: UnsafeMutablePointer<GList>? = caps
            while let n = node {
                if let p = n.pointee.data, String(cString: p.assumingMemoryBound(to: CChar.self)) == "body-markup" { markup = true }
                node = n.pointee.next
            }
            g_list_free_full(caps, g_free)
        }
        bodyMarkup = markup
        return markup
    }

    /// Shows one notification (a synchronous D-Bus call).
    func show(_ n: DesktopNotification) throws {
        guard let note = notify_notification_new(n.summary, n.body, n.icon) else {
            throw Failure(description: "notify_notification_new failed")
        }
        notify_notification_set_app_name(note, appName)
        notify_notification_set_urgency(note, n.urgency == .critical ? NOTIFY_URGENCY_CRITICAL : n.urgency == .low ? NOTIFY_URGENCY_LOW : NOTIFY_URGENCY_NORMAL)
        notify_notification_set_timeout(note, n.expiry.milliseconds)
        notify_notification_set_category(note, n.category)
        notify_notification_set_hint(note, "desktop-entry", g_variant_new_string(n.desktopEntry))
        if let url = n.openURL {
            for action in ["default", "open"] {
                let box = Unmanaged.passRetained(URLBox(url)).toOpaque()
                notify_notification_add_action(note, action, "Open", { _, _, data in
                    guard let data else { return }
                    Unmanaged<URLBox>.fromOpaque(data).takeUnretainedValue().open()
                }, box, { data in
                    if let data { Unmanaged<URLBox>.fromOpaque(data).release() }
                })
            }
        }
        var error: UnsafeMutablePointer<GError>?
        guard notify_notification_show(note, &error) != 0 else {
            g_object_unref(note)
            reset()
            throw Failure(description: Self.take(error, or: "Notify failed"))
        }
        if n.openURL != nil {
            // Keep the notification (and its action callbacks) alive until the server closes it.
            let closed: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { object, _ in
                if let object { g_object_unref(object) }
            }
            g_signal_connect_data(note, "closed", unsafeBitCast(closed, to: GCallback.self), nil, nil, GConnectFlags(0))
        } else {
            g_object_unref(note)
        }
    }

    /// Forgets the connection so the next call starts afresh (after a failure). Note that
    /// `notify_uninit` closes the notifications that still have actions.
    func reset() {
        if notify_is_initted() != 0 { notify_uninit() }
        if let bus { g_object_unref(UnsafeMutableRawPointer(bus)) }
        bus = nil
        bodyMarkup = nil
    }

    private static func take(_ error: UnsafeMutablePointer<GError>?, or fallback: String) -> String {
        guard let error else { return fallback }
        defer { g_error_free(error) }
        var text = error.pointee.message.map { String(cString: $0) } ?? fallback
        // GDBus prefixes remote errors with "GDBus.Error:org.freedesktop…: "; keep the human part.
        if text.hasPrefix("GDBus.Error:"), let colon = text.range(of: ": ") { text = String(text[colon.upperBound...]) }
        return text
    }
}

/// The URL an "Open" action opens, with `xdg-open` (spawned detached; GLib reaps it).
private final class URLBox {
    let url: String
    init(_ url: String) { self.url = url }

    func open() {
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("xdg-open"), strdup(url), nil]
        defer { argv.forEach { free($0) } }
        var error: UnsafeMutablePointer<GError>?
        if g_spawn_async(nil, &argv, nil, G_SPAWN_SEARCH_PATH, nil, nil, nil, &error) == 0, let error {
            g_error_free(error)
        }
    }
}
