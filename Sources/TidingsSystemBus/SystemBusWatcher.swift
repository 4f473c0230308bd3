import CLibnotify
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import Synchronization
import TidingsEngine
import TidingsPluginAPI

/// Follows the host on the system D-Bus for the daemon's scheduler (DESIGN §6): logind's
/// `PrepareForSleep(b)` and NetworkManager's `State`/`Connectivity` (``NetworkManagerState``).
///
/// GDBus (GIO, whose headers come through CLibnotify) runs on one dedicated thread with its
/// own main context, for the life of the process; signals are turned into ``HostChange``s on
/// ``start()``'s stream, in order. Without a system bus the stream ends at once and the
/// conditions stay online and awake (polling as scheduled); without NetworkManager the network
/// counts as online until it appears on the bus.
package final class SystemBusWatcher: @unchecked Sendable {
    private static let login1 = "org.freedesktop.login1"
    private static let networkManager = "org.freedesktop.NetworkManager"
    private static let networkManagerPath = "/org/freedesktop/NetworkManager"
    /// How long a daemon waits at start for the first reading (a hung bus must not stop it).
    private static let startPatience: TimeInterval = 2
    /// Milliseconds a call on the bus may take.
    private static let callTimeout: Int32 = 2000

    private let logger: Logger
    private let changes: AsyncStream<HostChange>
    private let feed: AsyncStream<HostChange>.Continuation
    /// Whether ``start()`` has returned: a first reading that comes later is a change.
    private let answered = Mutex(false)
    // Touched only on the watcher's thread:
    private var connection: OpaquePointer?
    /// Nil while NetworkManager is not on the bus.
    private var networkManager: NetworkManagerState?
    private var reported = Connectivity.online

    package init(logger: Logger) {
        self.logger = logger
        (changes, feed) = AsyncStream<HostChange>.makeStream()
    }

    /// Connects (on the watcher's thread), subscribes, and reads NetworkManager's state; returns
    /// the conditions now (after at most ``startPatience``) and the changes from then on.
    package func start() async -> (HostConditions, AsyncStream<HostChange>) {
        let initial = await withCheckedContinuation { (c: CheckedContinuation<HostConditions, Never>) in
            let resume: @Sendable (HostConditions) -> Bool = { conditions in
                guard
                    self.answered.withLock({ done in
                        defer { done = true }
                        return !done
                    })
                else { return false }
                c.resume(returning: conditions)
                return true
            }
            startDetachedThread(name: "tidings-system-bus") { [self] in self.main(ready: resume) }
            DispatchQueue.global().asyncAfter(deadline: .now() + Self.startPatience) {
                if resume(HostConditions()) {
                    self.logger.warning("the system bus did not answer within \(DurationParser.format(Self.startPatience)); polling as scheduled meanwhile")
                }
            }
        }
        return (initial, changes)
    }

    private func main(ready: @Sendable (HostConditions) -> Bool) {
        // No socket where the bus would be: nothing to connect to, and GIO with its libraries
        // (about 3.5 MiB) is not loaded for it (containers, build hosts, the opt-out below).
        if let socket = Self.systemBusSocket(), let why = Self.notASocket(socket) {
            logger.info("no system bus (\(socket): \(why)): sleep and network changes are not followed; polling as scheduled")
            feed.finish()
            _ = ready(HostConditions())
            return
        }
        // GIO is loaded here, on the watcher's thread: only `run` maps it (DESIGN §15).
        if let missing = tidings_gio_load() {
            logger.info("\(String(cString: missing)): sleep and network changes are not followed; polling as scheduled")
            feed.finish()
            _ = ready(HostConditions())
            return
        }
        let context = tidings_g_main_context_new()
        tidings_g_main_context_push_thread_default(context)
        guard connect() else {
            feed.finish()
            _ = ready(HostConditions())
            return
        }
        reported = networkManager?.network ?? .online
        if !ready(HostConditions(network: reported)), reported != .online { feed.yield(.network(reported)) }
        while true { tidings_g_main_context_iteration(context, 1) }
    }

    // MARK: connecting

    /// The socket GIO would connect to for the system bus: `DBUS_SYSTEM_BUS_ADDRESS` when it is
    /// one plain `unix:path=PATH`, else GIO's default when it is unset; nil for any other
    /// address (GIO reads it).
    static func systemBusSocket(_ address: String? = getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }) -> String? {
        guard let address else { return "/var/run/dbus/system_bus_socket" }
        let prefix = "unix:path="
        guard address.hasPrefix(prefix), !address.contains(where: { $0 == "," || $0 == ";" || $0 == "%" }) else { return nil }
        return String(address.dropFirst(prefix.count))
    }

    /// Why `path` is no socket (it does not exist, or is something else), or nil for a socket.
    static func notASocket(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return String(cString: strerror(errno)) }
        return st.st_mode & S_IFMT == S_IFSOCK ? nil : "not a socket"
    }

    private func connect() -> Bool {
        var error: UnsafeMutablePointer<GError>?
        guard let bus = tidings_g_bus_get_sync(G_BUS_TYPE_SYSTEM, nil, &error) else {
            logger.info("no system bus (\(Self.take(error))): sleep and network changes are not followed; polling as scheduled")
            return false
        }
        // GIO's default would raise SIGTERM in the daemon when the bus goes away.
        tidings_g_dbus_connection_set_exit_on_close(bus, 0)
        connection = bus
        let me = Unmanaged.passRetained(self).toOpaque()  // for the process's life
        let closed: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<GError>?, UnsafeMutableRawPointer?) -> Void = { _, _, _, data in
            guard let data else { return }
            Unmanaged<SystemBusWatcher>.fromOpaque(data).takeUnretainedValue().busClosed()
        }
        tidings_g_signal_connect_data(UnsafeMutableRawPointer(bus), "closed", unsafeBitCast(closed, to: GCallback.self), me, nil, GConnectFlags(0))

        subscribe(sender: Self.login1, interface: "org.freedesktop.login1.Manager", member: "PrepareForSleep", path: "/org/freedesktop/login1")
        subscribe(sender: Self.networkManager, interface: Self.networkManager, member: "StateChanged", path: Self.networkManagerPath)
        subscribe(
            sender: Self.networkManager, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            path: Self.networkManagerPath, arg0: Self.networkManager)
        // The older per-interface form (deprecated by NetworkManager, still sent by some releases and by dbusmock).
        subscribe(sender: Self.networkManager, interface: Self.networkManager, member: "PropertiesChanged", path: Self.networkManagerPath)
        subscribe(
            sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
            path: "/org/freedesktop/DBus", arg0: Self.networkManager)

        readNetworkManager()
        let logind = hasOwner(Self.login1) ? "following logind's sleep signals" : "logind is not on it (sleep is noticed by the clock jump only)"
        let nm =
            networkManager.map { "NetworkManager says \($0.summary): network \($0.network == .online ? "online" : "offline")" }
            ?? "NetworkManager is not on it (the network counts as online)"
        logger.info("system bus: \(logind); \(nm)")
        return true
    }

    private func subscribe(sender: String, interface: String, member: String, path: String, arg0: String? = nil) {
        let callback: GDBusSignalCallback = { _, _, _, interface, member, parameters, data in
            guard let data, let member, let parameters else { return }
            Unmanaged<SystemBusWatcher>.fromOpaque(data).takeUnretainedValue()
                .received(String(cString: member), interface: interface.map { String(cString: $0) } ?? "", parameters)
        }
        _ = tidings_g_dbus_connection_signal_subscribe(
            connection, sender, interface, member, path, arg0, G_DBUS_SIGNAL_FLAGS_NONE,
            callback, Unmanaged.passUnretained(self).toOpaque(), nil)
    }

    // MARK: signals

    private func received(_ member: String, interface: String, _ parameters: OpaquePointer) {
        switch (member, Self.typeString(parameters)) {
        case ("PrepareForSleep", "(b)"):
            let sleeping = Self.child(parameters, 0) { tidings_g_variant_get_boolean($0) != 0 }
            feed.yield(.power(sleeping ? .goingToSleep : .awake))
        case ("StateChanged", "(u)"):
            networkManager = networkManager ?? NetworkManagerState()
            networkManager?.merge(state: Self.child(parameters, 0) { tidings_g_variant_get_uint32($0) }, connectivity: nil)
            networkMayHaveChanged()
        case ("PropertiesChanged", "(sa{sv}as)"):
            Self.child(parameters, 1) { mergeProperties($0) }
        case ("PropertiesChanged", "(a{sv})") where interface == Self.networkManager:
            Self.child(parameters, 0) { mergeProperties($0) }
        case ("NameOwnerChanged", "(sss)"):
            let owner = Self.child(parameters, 2) { String(cString: tidings_g_variant_get_string($0, nil)) }
            if owner.isEmpty {
                networkManager = nil
                logger.info("NetworkManager left the system bus: the network counts as online")
            } else {
                readNetworkManager()
                logger.info("NetworkManager appeared on the system bus: \(networkManager?.summary ?? "its state could not be read")")
            }
            networkMayHaveChanged()
        default:
            break
        }
    }

    private func mergeProperties(_ dictionary: OpaquePointer) {
        let state = Self.lookupUInt32(dictionary, "State")
        let connectivity = Self.lookupUInt32(dictionary, "Connectivity")
        guard state != nil || connectivity != nil else { return }
        networkManager = networkManager ?? NetworkManagerState()
        networkManager?.merge(state: state, connectivity: connectivity)
        networkMayHaveChanged()
    }

    private func networkMayHaveChanged() {
        let now = networkManager?.network ?? .online
        guard now != reported else { return }
        reported = now
        if let nm = networkManager { logger.debug("NetworkManager: \(nm.summary)") }
        feed.yield(.network(now))
    }

    /// The bus went away (a restart of dbus): back to polling as scheduled.
    private func busClosed() {
        logger.warning("the system bus closed: sleep and network changes are no longer followed; polling as scheduled")
        networkManager = nil
        networkMayHaveChanged()
        feed.yield(.power(.awake))
        feed.finish()
    }

    // MARK: calls

    /// `State` and `Connectivity` now; nil when NetworkManager is not on the bus.
    private func readNetworkManager() {
        let reply = call(Self.networkManager, Self.networkManagerPath, "org.freedesktop.DBus.Properties", "GetAll", [Self.networkManager])
        guard let reply else {
            networkManager = nil
            return
        }
        defer { tidings_g_variant_unref(reply) }
        guard Self.typeString(reply) == "(a{sv})" else { return }
        var state = NetworkManagerState()
        Self.child(reply, 0) { dict in
            state.merge(state: Self.lookupUInt32(dict, "State"), connectivity: Self.lookupUInt32(dict, "Connectivity"))
        }
        networkManager = state
    }

    private func hasOwner(_ name: String) -> Bool {
        guard let reply = call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", [name]) else { return false }
        defer { tidings_g_variant_unref(reply) }
        guard Self.typeString(reply) == "(b)" else { return false }
        return Self.child(reply, 0) { tidings_g_variant_get_boolean($0) != 0 }
    }

    /// A method call with string arguments; nil (logged at debug) when it fails. Services
    /// are not started for it (no D-Bus activation of NetworkManager by tidings).
    private func call(_ name: String, _ path: String, _ interface: String, _ method: String, _ arguments: [String]) -> OpaquePointer? {
        var children: [OpaquePointer?] = arguments.map { tidings_g_variant_new_string($0) }
        let parameters = tidings_g_variant_new_tuple(&children, gsize(children.count))
        var error: UnsafeMutablePointer<GError>?
        let reply = tidings_g_dbus_connection_call_sync(
            connection, name, path, interface, method, parameters, nil,
            G_DBUS_CALL_FLAGS_NO_AUTO_START, Self.callTimeout, nil, &error)
        if reply == nil { logger.debug("\(name) \(method): \(Self.take(error))") }
        return reply
    }

    // MARK: GVariant

    private static func typeString(_ v: OpaquePointer) -> String { String(cString: tidings_g_variant_get_type_string(v)) }

    private static func child<T>(_ v: OpaquePointer, _ index: Int, _ body: (OpaquePointer) -> T) -> T {
        let c = tidings_g_variant_get_child_value(v, gsize(index))!
        defer { tidings_g_variant_unref(c) }
        return body(c)
    }

    /// A `u` value of an `a{sv}` dictionary.
    private static func lookupUInt32(_ dictionary: OpaquePointer, _ key: String) -> UInt32? {
        guard let v = tidings_g_variant_lookup_value(dictionary, key, nil) else { return nil }
        defer { tidings_g_variant_unref(v) }
        return typeString(v) == "u" ? tidings_g_variant_get_uint32(v) : nil
    }

    private static func take(_ error: UnsafeMutablePointer<GError>?) -> String {
        guard let error else { return "unknown error" }
        defer { tidings_g_error_free(error) }
        return String(cString: error.pointee.message)
    }
}
