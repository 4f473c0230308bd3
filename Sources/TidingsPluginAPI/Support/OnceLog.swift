import Logging
import Synchronization

/// Logs a recurring failure once per outage: the first failure as an error, repeats at
/// debug, and the first success after it as a notice. (A full disk is one clear line, not
/// one per poll or delivery.)
package final class OnceLog: Sendable {
    private let failing = Mutex<Set<String>>([])

    package init() {}

    package func failed(_ key: String, _ message: String, logger: Logger) {
        if failing.withLock({ $0.insert(key).inserted }) {
            logger.error("\(message)")
        } else {
            logger.debug("\(message)")
        }
    }

    package func succeeded(_ key: String, _ message: @autoclosure () -> String, logger: Logger) {
        if failing.withLock({ $0.remove(key) != nil }) { logger.notice("\(message())") }
    }
}
