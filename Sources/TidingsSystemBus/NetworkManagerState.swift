import TidingsEngine
import TidingsPluginAPI

/// NetworkManager's `State` and `Connectivity` properties (interface
/// `org.freedesktop.NetworkManager` on `/org/freedesktop/NetworkManager`), as far as they are
/// known, and what they mean for polling.
///
/// Offline means NetworkManager has no active connection: `State` is asleep (10),
/// disconnected (20), disconnecting (30) or connecting (40; NetworkManager asks applications
/// not to try the network yet). Connected with local or site connectivity only (50, 60), or
/// connectivity `portal`/`limited`, is online: sources on the local network may still answer,
/// and failures count as usual. Only when `State` is unknown (0 or not read) does
/// `Connectivity` decide: `none` (1) is offline.
package struct NetworkManagerState: Sendable, Equatable {
    /// NMState: 0 unknown, 10 asleep, 20 disconnected, 30 disconnecting, 40 connecting,
    /// 50 connected (local), 60 connected (site), 70 connected (global).
    package var state: UInt32?
    /// NMConnectivityState: 0 unknown, 1 none, 2 portal, 3 limited, 4 full.
    package var connectivity: UInt32?

    package init(state: UInt32? = nil, connectivity: UInt32? = nil) {
        self.state = state
        self.connectivity = connectivity
    }

    static let connectedLocal: UInt32 = 50
    static let connectivityNone: UInt32 = 1

    package var network: Connectivity {
        if let state, state != 0 { return state < Self.connectedLocal ? .offline : .online }
        return connectivity == Self.connectivityNone ? .offline : .online
    }

    /// Properties a `PropertiesChanged` signal or `GetAll` carried; absent ones stay as they were.
    package mutating func merge(state: UInt32?, connectivity: UInt32?) {
        if let state { self.state = state }
        if let connectivity { self.connectivity = connectivity }
    }

    /// For the log: `state 70 (connected, global), connectivity 4 (full)`.
    package var summary: String {
        let states: [UInt32: String] = [
            0: "unknown", 10: "asleep", 20: "disconnected", 30: "disconnecting", 40: "connecting",
            50: "connected, local", 60: "connected, site", 70: "connected, global",
        ]
        let connectivities: [UInt32: String] = [0: "unknown", 1: "none", 2: "portal", 3: "limited", 4: "full"]
        func name(_ v: UInt32?, _ names: [UInt32: String]) -> String {
            guard let v else { return "not known" }
            return "\(v) (\(names[v] ?? "?"))"
        }
        return "state \(name(state, states)), connectivity \(name(connectivity, connectivities))"
    }
}
