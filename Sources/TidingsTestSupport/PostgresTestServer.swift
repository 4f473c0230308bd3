import Foundation
import Synchronization
import TidingsPostgres

#if canImport(Glibc)
    import Glibc
    import TidingsPluginAPI
    import TidingsEngine
    import TidingsSQLite
#endif

/// One real PostgreSQL per test process (Debian's `postgresql` package), started on first use
/// with initdb and pg_ctl in a temp dir on a free loopback port, stopped at exit. Each test
/// asks for a fresh database of its own (``freshDatabase(poolSize:)``).
///
/// initdb and postgres refuse to run as root: as root, both run as `nobody`, which then owns
/// the temp dir. Authentication is SCRAM with a generated password, so tests of a wrong
/// password mean something.
package final class PostgresTestServer: Sendable {
    package let port: Int
    /// The Unix socket directory (`-k`).
    package let socketDirectory: String
    package static let superuser = "tidings"
    package var user: String { Self.superuser }
    package let password: String
    package let directory: String
    private let bin: String
    private let runAs: String?
    private let counter = Atomic<Int>(0)

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// The process's server, started by the first caller. A failure to start is kept: every
    /// test that needs it reports the same reason.
    package static func shared() throws -> PostgresTestServer { try plain.get() }

    /// A second server, with TLS (`ssl=on`, a certificate for DNS:localhost only, signed by a
    /// CA of its own: ``caFile``), for the sslmode tests. Started on first use.
    package static func sharedTLS() throws -> PostgresTestServer { try withTLS.get() }

    private static let plain = start(tls: false)
    private static let withTLS = start(tls: true)

    private static func start(tls: Bool) -> Result<PostgresTestServer, Failure> {
        do {
            let server = try PostgresTestServer(tls: tls)
            let first = running.withLock { list in
                list.append(server)
                return list.count == 1
            }
            if first { atexit { for s in PostgresTestServer.running.withLock({ $0 }) { s.stop() } } }
            return .success(server)
        } catch let e as Failure {
            return .failure(e)
        } catch {
            return .failure(Failure(description: "\(error)"))
        }
    }

    private static let running = Mutex<[PostgresTestServer]>([])

    /// With TLS: the CA that signed the server's certificate, and one that did not.
    package var caFile: String { "\(directory)/ca.crt" }
    package var otherCAFile: String { "\(directory)/other-ca.crt" }

    private init(tls: Bool) throws {
        let bin = try Self.findBinaries()
        let runAs: String? = getuid() == 0 ? "nobody" : nil
        let base = runAs != nil ? "/tmp" : NSTemporaryDirectory()
        Self.removeAbandoned(in: base, bin: bin, runAs: runAs)
        var template = Array("\(base)/tidings-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure(description: "cannot create a temp dir in \(base): \(String(cString: strerror(errno)))") }
        let directory = String(cString: made)
        let socketDirectory = "\(directory)/sock"
        let password = (0..<4).map { _ in String(UInt64.random(in: .min ... .max), radix: 36) }.joined()
        try FileManager.default.createDirectory(atPath: socketDirectory, withIntermediateDirectories: true)
        try password.write(toFile: "\(directory)/pw", atomically: false, encoding: .utf8)
        try "\(getpid())\n".write(toFile: "\(directory)/owner.pid", atomically: false, encoding: .utf8)
        if let runAs {
            guard let pw = getpwnam(runAs) else { throw Failure(description: "no user '\(runAs)' to run PostgreSQL as (initdb refuses root)") }
            for path in [directory, socketDirectory, "\(directory)/pw"] {
                guard chown(path, pw.pointee.pw_uid, pw.pointee.pw_gid) == 0 else {
                    throw Failure(description: "cannot chown \(path) to \(runAs): \(String(cString: strerror(errno)))")
                }
            }
        }
        self.bin = bin
        self.runAs = runAs
        self.directory = directory
        self.socketDirectory = socketDirectory
        self.password = password
        let user = Self.superuser
        let tlsOptions = tls ? try Self.makeCertificates(in: directory, bin: bin, runAs: runAs) : ""
        func run(_ program: String, _ arguments: [String]) throws {
            try Self.run(program, arguments, bin: bin, runAs: runAs, directory: directory)
        }
        try run(
            "initdb",
            [
                "-D", "\(directory)/data", "-U", user, "-A", "scram-sha-256", "--pwfile=\(directory)/pw",
                "-E", "UTF8", "--locale=C", "--no-sync",
            ])
        port = try {
            var lastError: (any Error)?
            for _ in 0..<3 {
                let port = try Self.freePort()
                do {
                    try run(
                        "pg_ctl",
                        [
                            "-D", "\(directory)/data", "-l", "\(directory)/server.log", "-w", "-t", "60",
                            "-o", "-p \(port) -k \(socketDirectory) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200\(tlsOptions)",
                            "start",
                        ])
                    return port
                } catch {
                    lastError = error
                }
            }
            throw lastError!
        }()
    }

    /// `pg_ctl stop -m immediate` and the temp dir removed (at exit).
    package func stop() {
        try? run("pg_ctl", ["-D", "\(directory)/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A new, empty database on the shared server, as `[state]` settings (TCP on loopback,
    /// sslmode disable, the server's password).
    package static func freshDatabase(poolSize: Int = 4) throws -> StateSettings {
        let server = try shared()
        let name = try server.createDatabase()
        return server.settings(database: name, poolSize: poolSize)
    }

    package func settings(
        database: String, poolSize: Int = 4, password: String? = nil, tls: StateSettings.TLSMode = .disable,
        caFile: String? = nil, host: String = "127.0.0.1", unixSocket: Bool = false
    ) -> StateSettings {
        let url =
            unixSocket
            ? URL(string: "postgres://\(user)@/\(database)?host=\(socketDirectory)&port=\(port)")!
            : URL(string: "postgres://\(user)@\(host):\(port)/\(database)?sslmode=\(tls.rawValue)")!
        return StateSettings(url: url, password: Secret(password ?? self.password), tls: tls, caFile: caFile, poolSize: poolSize, connectTimeout: 10)
    }

    /// `CREATE DATABASE t_PID_N`; returns its name.
    package func createDatabase() throws -> String {
        let name = "t_\(getpid())_\(counter.wrappingAdd(1, ordering: .relaxed).newValue)"
        try admin("CREATE DATABASE \(name)")
        return name
    }

    /// Runs one statement as the superuser in the `postgres` database (through libpq, as
    /// tidings connects).
    package func admin(_ sql: String) throws {
        do {
            try PostgresStateDatabase.runAlone(sql, on: settings(database: "postgres", poolSize: 1))
        } catch {
            throw Failure(description: "\(sql): \(error)")
        }
    }

    /// A CA, a server certificate it signs (subjectAltName DNS:localhost, not the IP), and an
    /// unrelated CA; returns postgres's options to use them.
    private static func makeCertificates(in dir: String, bin: String, runAs: String?) throws -> String {
        try "subjectAltName=DNS:localhost\n".write(toFile: "\(dir)/san.ext", atomically: false, encoding: .utf8)
        let steps: [[String]] = [
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.crt", "-days", "2", "-subj",
                "/CN=tidings test CA",
            ],
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(dir)/other-ca.key", "-out", "\(dir)/other-ca.crt", "-days", "2", "-subj",
                "/CN=tidings other CA",
            ],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(dir)/server.key", "-out", "\(dir)/server.csr", "-subj", "/CN=localhost"],
            [
                "x509", "-req", "-in", "\(dir)/server.csr", "-CA", "\(dir)/ca.crt", "-CAkey", "\(dir)/ca.key", "-CAcreateserial",
                "-out", "\(dir)/server.crt", "-days", "2", "-extfile", "\(dir)/san.ext",
            ],
        ]
        for step in steps {
            try run("openssl", step, bin: bin, runAs: nil, directory: dir, executable: "/usr/bin/openssl")
        }
        guard chmod("\(dir)/server.key", 0o600) == 0 else { throw Failure(description: "chmod server.key: \(String(cString: strerror(errno)))") }
        if let runAs, let pw = getpwnam(runAs) {
            for file in ["server.key", "server.crt", "ca.crt"] where chown("\(dir)/\(file)", pw.pointee.pw_uid, pw.pointee.pw_gid) != 0 {
                throw Failure(description: "cannot chown \(file) to \(runAs): \(String(cString: strerror(errno)))")
            }
        }
        return " -c ssl=on -c ssl_cert_file=\(dir)/server.crt -c ssl_key_file=\(dir)/server.key"
    }

    /// Servers of test processes that died without their atexit (a crash, kill -9): stopped,
    /// and their temp dirs removed. A dir's `owner.pid` names the test process.
    private static func removeAbandoned(in base: String, bin: String, runAs: String?) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []
        for name in names where name.hasPrefix("tidings-pg-") {
            let dir = "\(base)/\(name)"
            guard let text = try? String(contentsOfFile: "\(dir)/owner.pid", encoding: .utf8),
                let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)),
                kill(pid, 0) != 0 && errno == ESRCH
            else { continue }
            if FileManager.default.fileExists(atPath: "\(dir)/data/postmaster.pid") {
                try? run("pg_ctl", ["-D", "\(dir)/data", "-m", "immediate", "-w", "stop"], bin: bin, runAs: runAs, directory: dir)
            }
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    /// The newest /usr/lib/postgresql/N/bin that has initdb.
    private static func findBinaries() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        let found = versions.compactMap { v in Int(v).map { ($0, "\(root)/\(v)/bin") } }
            .filter { FileManager.default.isExecutableFile(atPath: "\($0.1)/initdb") }
            .max { $0.0 < $1.0 }
        guard let found else {
            throw Failure(description: "no PostgreSQL server binaries in \(root)/*/bin (install Debian's postgresql package: make test-deps)")
        }
        return found.1
    }

    /// A loopback port nothing listens on right now.
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0
            }
        }
        guard ok else { throw Failure(description: "cannot find a free loopback port: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// Runs a PostgreSQL program (as `runAs` when root); its output goes to a log in the temp
    /// dir, quoted in the error when it fails.
    private func run(_ program: String, _ arguments: [String]) throws {
        try Self.run(program, arguments, bin: bin, runAs: runAs, directory: directory)
    }

    /// posix_spawn and waitpid, not Foundation's `Process`: that waits for a descriptor every
    /// descendant inherits, and the postgres that pg_ctl leaves running would keep it open.
    private static func run(
        _ program: String, _ arguments: [String], bin: String, runAs: String?, directory: String,
        executable: String? = nil
    ) throws {
        let path = executable ?? "\(bin)/\(program)"
        let argv = runAs.map { ["/usr/sbin/runuser", "-u", $0, "--", path] } ?? [path]
        let all = argv + arguments
        let logPath = "\(directory)/\(program).out"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let cArgs = all.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, all[0], &actions, nil, cArgs, environ)
        guard spawned == 0 else { throw Failure(description: "cannot run \(all[0]): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = status & 0x7f == 0
        let code = (status >> 8) & 0xff
        guard exited && code == 0 else {
            let output = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            let serverLog = program == "pg_ctl" ? ((try? String(contentsOfFile: "\(directory)/server.log", encoding: .utf8)) ?? "") : ""
            throw Failure(
                description: "\(program) failed (\(exited ? "exit \(code)" : "signal \(status & 0x7f)")): \(output.suffix(1500))\(serverLog.suffix(1500))")
        }
    }
}
