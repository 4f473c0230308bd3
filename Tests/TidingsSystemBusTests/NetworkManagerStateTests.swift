import TidingsSystemBus
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// What NetworkManager's `State` and `Connectivity` mean for polling (the rest of the system-bus
/// watcher runs end to end in Tests/e2e/test_sleep_network.py).
final class NetworkManagerStateTests: XCTestCase {
    func testNoActiveConnectionIsOfflineAnyConnectionIsOnline() {
        for state: UInt32 in [10, 20, 30, 40] {
            XCTAssertEqual(NetworkManagerState(state: state, connectivity: 4).network, .offline, "state \(state)")
        }
        // Local or site connectivity only: sources on the LAN may answer.
        for state: UInt32 in [50, 60, 70] {
            XCTAssertEqual(NetworkManagerState(state: state, connectivity: 1).network, .online, "state \(state)")
        }
    }

    func testConnectivityDecidesOnlyWhenTheStateIsUnknown() {
        XCTAssertEqual(NetworkManagerState(state: 0, connectivity: 1).network, .offline)
        XCTAssertEqual(NetworkManagerState(state: nil, connectivity: 1).network, .offline)
        for connectivity: UInt32 in [0, 2, 3, 4] {
            XCTAssertEqual(NetworkManagerState(state: 0, connectivity: connectivity).network, .online)
        }
        XCTAssertEqual(NetworkManagerState().network, .online, "nothing known: polling as usual")
    }

    func testASignalCarryingOnePropertyKeepsTheOther() {
        var nm = NetworkManagerState(state: 70, connectivity: 4)
        nm.merge(state: 20, connectivity: nil)
        XCTAssertEqual(nm, NetworkManagerState(state: 20, connectivity: 4))
        XCTAssertEqual(nm.summary, "state 20 (disconnected), connectivity 4 (full)")
    }
}
