import FoundationEssentials
import Synchronization
import TidingsPluginAPI

/// Whether the host can reach the network, as NetworkManager says (DESIGN §6). Without
/// NetworkManager or a system bus it stays `online`: polling goes on as scheduled.
package enum Connectivity: Sendable, Equatable {
    case online
    case offline
}

/// Whether the host is awake, as logind says with `PrepareForSleep`.
package enum PowerState: Sendable, Equatable {
    case awake
    /// `PrepareForSleep(true)` came: the host is going to sleep (or asleep).
    case goingToSleep
}

/// Why scheduled polls wait now.
package enum PollPause: String, Sendable, Equatable {
    case offline = "network offline"
    case asleep = "going to sleep"
}

/// What the host says about polling: scheduled polls start only while the network is online
/// and the host awake; a poll that fails while they are paused is not held against its source.
package struct HostConditions: Sendable, Equatable {
    package var network: Connectivity
    package var power: PowerState

    package init(network: Connectivity = .online, power: PowerState = .awake) {
        self.network = network
        self.power = power
    }

    /// Why polls wait now; nil while they run.
    package var pause: PollPause? {
        if power == .goingToSleep { return .asleep }
        if network == .offline { return .offline }
        return nil
    }

    /// Why polls would wait if not for `change`'s side (network or sleep).
    func pause(besides change: HostChange) -> PollPause? {
        switch change {
        case .network: return HostConditions(network: .online, power: power).pause
        case .power: return HostConditions(network: network, power: .awake).pause
        }
    }

    package mutating func apply(_ change: HostChange) {
        switch change {
        case .network(let n): network = n
        case .power(let p): power = p
        }
    }
}

/// One change the system bus reports.
package enum HostChange: Sendable, Equatable {
    case network(Connectivity)
    case power(PowerState)

    /// The log's name for it.
    var name: String {
        switch self {
        case .network(.online): return "network online"
        case .network(.offline): return "network offline"
        case .power(.goingToSleep): return "going to sleep"
        case .power(.awake): return "resumed from sleep"
        }
    }
}

/// The scheduler's ``HostConditions`` as a poll in flight sees them when it ends
/// (``PollRunner``): a failure recorded while polls are paused is not counted.
package final class SharedHostConditions: Sendable {
    private let value: Mutex<HostConditions>

    package init(_ initial: HostConditions) { value = Mutex(initial) }

    package var current: HostConditions {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}
