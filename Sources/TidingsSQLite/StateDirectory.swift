import FoundationEssentials
import Glibc
import TidingsEngine
import TidingsPluginAPI

/// The state directory and its SQLite files, made safe before SQLite opens them.
///
/// The directory (created 0700 when missing) must belong to the running user (or root) and be
/// writable by no one else, and the directories above it must be safe as for the config
/// (``FileTrust``): anyone who can write the state can queue events for the sinks, an exec sink
/// among them. `tidings.sqlite`, `-wal` and `-shm` must not be symbolic links (SQLite would
/// follow them: a planted link makes tidings write wherever it points) and must be regular
/// files of the running user or root. The database is created 0600 (SQLite gives `-wal` and
/// `-shm` the database's mode), and an existing one open to others is narrowed to 0600.
package enum StateDirectory {
    package enum Failure: Error, CustomStringConvertible {
        /// Unsafe: every problem found, each naming its path.
        case refused([FileTrust.Problem])
        case cannotCreate(path: String, reason: String)

        package var description: String {
            switch self {
            case .refused(let problems): return problems.map(\.description).joined(separator: "; ")
            case .cannotCreate(let path, let reason): return "cannot create \(path): \(reason)"
            }
        }
    }

    package static let databaseName = "tidings.sqlite"

    /// Creates what is missing and checks the rest; returns the database path.
    @discardableResult
    package static func prepare(_ directory: String, trust: FileTrust = FileTrust()) throws -> String {
        try create(directory)
        let database = "\(directory)/\(databaseName)"
        var problems = trust.check(directory, as: .stateDirectory)
        for path in [database, "\(database)-wal", "\(database)-shm"] {
            problems += check(path, trust: trust)
        }
        guard problems.isEmpty else { throw Failure.refused(problems) }
        try createDatabase(database)
        return database
    }

    /// `mkdir -p` with mode 0700 for each directory it makes.
    private static func create(_ directory: String) throws {
        if let failure = makeDirectories(directory, mode: 0o700) {
            throw Failure.cannotCreate(path: failure.path, reason: String(cString: strerror(failure.errno)))
        }
    }

    /// One of the SQLite files, if it exists: not a link, a regular file, a trusted owner.
    /// One the running user owns but others may read or write is narrowed to 0600.
    private static func check(_ path: String, trust: FileTrust) -> [FileTrust.Problem] {
        var st = stat()
        guard lstat(path, &st) == 0 else { return [] }
        switch st.st_mode & S_IFMT {
        case S_IFLNK:
            return [
                FileTrust.Problem(
                    path: path,
                    message:
                        "state database file is a symbolic link, which tidings does not follow: remove it (rm \(path)), or point --state-dir at the real directory"
                )
            ]
        case S_IFREG:
            break
        default:
            return [FileTrust.Problem(path: path, message: "state database file is not a regular file")]
        }
        if st.st_uid == trust.user && st.st_mode & 0o077 != 0 {
            chmod(path, 0o600)
            return []
        }
        return trust.checkEntry(path, as: .database)
    }

    /// A missing database is created empty, 0600, without following a link; SQLite takes an
    /// empty file for a new database.
    private static func createDatabase(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd >= 0 {
            close(fd)
        } else if errno != EEXIST {
            throw Failure.cannotCreate(path: path, reason: String(cString: strerror(errno)))
        }
    }
}
