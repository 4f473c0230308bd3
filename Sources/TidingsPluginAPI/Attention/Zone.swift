import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A time zone read from the system's zoneinfo (TZif files, RFC 8536), not from ICU: named
/// zones (`Europe/Berlin`) and the local zone (`TZ`, else `/etc/localtime`, else UTC).
/// Immutable, so it may be shared between threads; loaded zones are cached.
package struct Zone: Sendable, Equatable, CustomStringConvertible {
    /// The IANA name (`Europe/Berlin`), the POSIX TZ string it was made from, or `localtime`.
    package let identifier: String
    package let rules: ZoneRules

    package init(identifier: String, rules: ZoneRules) {
        self.identifier = identifier
        self.rules = rules
    }

    package var description: String { identifier }

    package static let utc = Zone(identifier: "UTC", rules: ZoneRules(fixed: .init(offset: 0, isDST: false, abbreviation: "UTC")))

    /// Where zone files are: `$TZDIR`, else `/usr/share/zoneinfo`.
    package static var directory: String {
        if let d = getenv("TZDIR").map({ String(cString: $0) }), !d.isEmpty { return d }
        return "/usr/share/zoneinfo"
    }

    /// A named zone from `directory`, or nil when the name is not a zone there. Names are checked
    /// before the file system is touched: relative, no `.` or `..` part, letters, digits, `_+-`.
    package static func named(_ name: String, directory: String = Zone.directory) -> Zone? {
        guard isValidName(name) else { return nil }
        let key = directory + "\u{0}" + name
        if let z = cache.withLock({ $0[key] }) { return z }
        let zone: Zone
        if let bytes = readFile(directory + "/" + name), let rules = try? ZoneRules(tzif: bytes) {
            zone = Zone(identifier: name, rules: rules)
        } else if name == "UTC" || name == "Etc/UTC" || name == "GMT" || name == "Etc/GMT" {
            zone = Zone(identifier: name, rules: utc.rules)  // also without tzdata installed
        } else {
            return nil
        }
        cache.withLock { cache in
            if cache.count > 64 { cache.removeAll() }
            cache[key] = zone
        }
        return zone
    }

    static func isValidName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 255 else { return false }
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        return parts.allSatisfy { part in
            !part.isEmpty && part != "." && part != ".."
                && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" || $0 == "+" || $0 == ".") }
        }
    }

    private static let cache = Mutex<[String: Zone]>([:])

    /// The local zone: `TZ` from the environment, else `/etc/localtime`, else UTC. Read once
    /// per `TZ` value.
    package static var current: Zone {
        let tz = getenv("TZ").map { String(cString: $0) }
        let key = "\u{1}" + (tz ?? "\u{2}")
        if let z = cache.withLock({ $0[key] }) { return z }
        let zone = local(tz: tz)
        cache.withLock { $0[key] = zone }
        return zone
    }

    /// The zone `TZ` names, as the C library reads it: unset → `localtime` (a TZif file,
    /// usually a link into the zoneinfo directory, whose name then names the zone); empty → UTC;
    /// `:NAME` or `NAME` → a zone file (a path when it starts with `/`), else a POSIX TZ string
    /// (`EST5EDT,M3.2.0,M11.1.0`); anything else → UTC.
    package static func local(tz: String?, localtime: String = "/etc/localtime", directory: String = Zone.directory) -> Zone {
        guard var spec = tz else {
            guard let bytes = readFile(localtime), let rules = try? ZoneRules(tzif: bytes) else { return utc }
            return Zone(identifier: linkedName(localtime, directory: directory) ?? "localtime", rules: rules)
        }
        if spec.isEmpty { return utc }
        if spec.first == ":" { spec.removeFirst() }
        if spec.first == "/" {
            guard let bytes = readFile(spec), let rules = try? ZoneRules(tzif: bytes) else { return utc }
            return Zone(identifier: linkedName(spec, directory: directory) ?? spec, rules: rules)
        }
        if let zone = named(spec, directory: directory) { return zone }
        if let posix = PosixTZ(spec) {
            if posix.dst == nil { return Zone(identifier: spec, rules: ZoneRules(fixed: posix.std)) }
            return Zone(identifier: spec, rules: ZoneRules(transitions: [], transitionTypes: [], types: [posix.std], footer: posix))
        }
        return utc
    }

    /// `Europe/Berlin` for a path that resolves to `<directory>/Europe/Berlin`.
    private static func linkedName(_ path: String, directory: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        let full = String(cString: resolved)
        var roots = [directory]
        if let root = realpath(directory, nil) {
            roots.append(String(cString: root))
            free(root)
        }
        for root in roots {
            let prefix = root.hasSuffix("/") ? root : root + "/"
            if full.hasPrefix(prefix) {
                let name = String(full.dropFirst(prefix.count))
                return isValidName(name) ? name : nil
            }
        }
        return nil
    }

    /// A regular file's bytes (at most 1 MiB: zone files are a few KiB), nil when unreadable.
    static func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        guard let bytes = readBytes(fd, upTo: (1 << 20) + 1), bytes.count <= 1 << 20 else { return nil }
        return bytes
    }

    // MARK: Instants and wall times (whole seconds after the Unix epoch)

    /// The local time type (offset, DST flag, abbreviation) at `instant`.
    package func type(at instant: Int64) -> ZoneRules.LocalType { rules.type(at: instant) }

    /// Seconds east of UTC at `instant`.
    package func offset(at instant: Int64) -> Int { rules.type(at: instant).offset }

    /// The wall time at `instant`.
    package func civil(at instant: Int64) -> CivilTime { CivilTime(seconds: instant + Int64(offset(at: instant))) }

    /// The instant at which the wall clock shows `wall`: a repeated time is its first
    /// occurrence, a time in a gap is the first time after it (the instant of the change).
    package func instant(of wall: CivilTime) -> Int64 { rules.instant(forLocal: wall.seconds) }
}
