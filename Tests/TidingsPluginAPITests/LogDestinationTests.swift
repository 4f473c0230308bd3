import Foundation
import Logging
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class LogDestinationTests: XCTestCase {
    /// Under journald: the syslog priority first, no timestamp, the same escaping and scrubbing.
    func testJournalLinesStartWithTheirPriority() {
        Redactor.shared.register("journal-secret-456")
        let line = StderrLogHandler.line(
            at: Date(timeIntervalSince1970: 0), level: .warning, metadata: ["source": "api"],
            message: "HTTP 500: a\n<3>forged \u{1B}[2J journal-secret-456", destination: .journal)
        XCTAssertEqual(line, #"<4>warning source=api HTTP 500: a <3>forged \u{1B}[2J ‹redacted›"# + "\n")
        let levels: [Logger.Level] = [.trace, .debug, .info, .notice, .warning, .error, .critical]
        XCTAssertEqual(levels.map(LogDestination.priority), ["<7>", "<7>", "<6>", "<5>", "<4>", "<3>", "<2>"])
    }

    func testJournalOnlyWhenJournalStreamNamesTheDescriptorsFile() throws {
        let pipe = Pipe()
        let fd = pipe.fileHandleForWriting.fileDescriptor
        var st = stat()
        XCTAssertEqual(fstat(fd, &st), 0)
        let mine = "\(st.st_dev):\(st.st_ino)"
        XCTAssertEqual(LogDestination.of(fileDescriptor: fd, environment: ["JOURNAL_STREAM": mine]), .journal)
        XCTAssertEqual(LogDestination.of(fileDescriptor: fd, environment: [:]), .plain)
        // Inherited by a process whose stderr goes elsewhere: another inode.
        XCTAssertEqual(LogDestination.of(fileDescriptor: fd, environment: ["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino + 1)"]), .plain)
        for bad in ["", "\(st.st_dev)", "\(st.st_dev):\(st.st_ino):1", "x:\(st.st_ino)"] {
            XCTAssertEqual(LogDestination.of(fileDescriptor: fd, environment: ["JOURNAL_STREAM": bad]), .plain, bad)
        }
        XCTAssertEqual(LogDestination.of(fileDescriptor: 9999, environment: ["JOURNAL_STREAM": mine]), .plain)
    }
}
