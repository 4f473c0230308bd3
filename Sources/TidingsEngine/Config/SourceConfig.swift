import FoundationEssentials
import TidingsPluginAPI

/// Settings every source has, whatever its provider (DESIGN §3). `[defaults]` supplies them.
package struct SourceSettings: Sendable, Hashable {
    package var interval: TimeInterval = 300
    package var jitter: Double = 0.1
    package var timeout: TimeInterval = 30
    package var errorThreshold: Int = 3
    package var maxBackoff: TimeInterval = 3600
    package var maxBody: Int = 10 << 20
    package var notifyExisting = false
    package var enabled = true
    /// How long a `notice` stays pending when nothing else ends it.
    package var noticeTTL: TimeInterval = 7 * 86_400
    /// Most events one poll may send; beyond it, one summary event instead (the state is
    /// still recorded in full).
    package var maxEvents = 1000
    /// `refuse_private_redirects`: unset is ``PrivateRedirects/auto``.
    package var privateRedirects = PrivateRedirects.auto
    /// `group`: a label (a feed reader's folder, `tidings export opml`'s category); shown by
    /// `tidings sources`, not used for routing.
    package var group: String?

    package init() {}

    static let keys = [
        "interval", "jitter", "timeout", "error_threshold", "max_backoff", "max_body", "notify_existing", "enabled", "notice_ttl", "max_events",
        "refuse_private_redirects", "group",
    ]

    /// Reads the keys present in `r` over `self`.
    package func overlaid(with r: OptionReader) throws -> SourceSettings {
        var s = self
        if let v = try r.duration("interval", minimum: 1) { s.interval = v }
        if let v = try r.double("jitter", range: 0...0.9) { s.jitter = v }
        if let v = try r.duration("timeout", minimum: 0.1) { s.timeout = v }
        if let v = try r.int("error_threshold", range: 1...1000) { s.errorThreshold = v }
        if let v = try r.duration("max_backoff", minimum: 1) { s.maxBackoff = v }
        if let v = try r.byteSize("max_body") { s.maxBody = v }
        if let v = try r.bool("notify_existing") { s.notifyExisting = v }
        if let v = try r.bool("enabled") { s.enabled = v }
        if let v = try r.duration("notice_ttl", minimum: 1) { s.noticeTTL = v }
        if let v = try r.int("max_events", range: 1...1_000_000) { s.maxEvents = v }
        if let v = try r.bool("refuse_private_redirects") { s.privateRedirects = v ? .refuse : .allow }
        if let v = try r.string("group") {
            guard !v.isEmpty, v.count <= 200, v.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else {
                throw r.error("group", "\(r.what): 'group' must be one line of text (at most 200 characters)")
            }
            s.group = v
        }
        return s
    }
}

/// One configured source: a provider instance plus its schedule settings.
///
/// Kept small (issue 33: 10,000 to 100,000 of them per daemon, most of them not held where
/// daemons share the state): sources with equal settings share one copy (``SharedSettings``),
/// `file` is kept as its folder (one string for the sources of one folder) and its name, and
/// the declaration's hash as 8 bytes (``CompactHash``).
package struct SourceConfig: Sendable {
    package var name: String
    package var provider: String
    package var settings: SourceSettings {
        get { shared.value }
        set { shared = SharedSettings.of(newValue) }
    }
    private var shared: SharedSettings
    package var flapWindow: TimeInterval
    package var instance: any Provider
    /// Where it was declared, for messages.
    package var file: String {
        get { folder.isEmpty ? fileName : folder + "/" + fileName }
        set { (folder, fileName) = SharedText.splitPath(newValue) }
    }
    private var folder: String
    private var fileName: String
    package var line: Int?
    /// Hash of the source's declaration: a reload with a different hash clears `auth-failed`.
    package var configHash: String {
        get { hash.text }
        set { hash = CompactHash(newValue) }
    }
    private var hash: CompactHash
    /// Set where daemons share a PostgreSQL state (issue 33): where the source as loaded is, in
    /// the compact form its provider is built from again (``SourceBuilder``) when this instance
    /// takes its lease; `instance` is then ``UnbuiltProvider`` (the scheduler attaches the
    /// built provider while it holds the lease). Nil: `instance` is the provider.
    package var recipe: SourceRecipe?

    package init(
        name: String, provider: String, settings: SourceSettings, flapWindow: TimeInterval, instance: any Provider,
        file: String, line: Int? = nil, configHash: String
    ) {
        self.name = name
        self.provider = SharedText.intern(provider)
        self.shared = SharedSettings.of(settings)
        self.flapWindow = flapWindow
        self.instance = instance
        (self.folder, self.fileName) = SharedText.splitPath(file)
        self.line = line
        self.hash = CompactHash(configHash)
    }

    /// Whether two sources share one copy of their settings (tests).
    func sharesSettings(with other: SourceConfig) -> Bool { shared === other.shared }
}

/// One source's settings, shared by every source whose settings are equal (most take all of
/// theirs from `[defaults]`): a reference in each source, not a copy of ~100 bytes.
final class SharedSettings: Sendable {
    let value: SourceSettings
    private init(_ value: SourceSettings) { self.value = value }

    /// Settings seen before (bounded: past 4,096 distinct ones, new ones are not kept).
    private static let known = SharedValues<SourceSettings, SharedSettings>()

    static func of(_ settings: SourceSettings) -> SharedSettings { known.value(settings) { SharedSettings($0) } }
}

/// Strings many sources hold equal (a provider's name, a plugins folder): one copy each.
/// Bounded like ``SharedSettings``; a string past the bound is kept as given.
package enum SharedText {
    private static let known = SharedValues<String, String>()

    package static func intern(_ text: String) -> String {
        // Up to 15 bytes a string is stored inline: nothing to share.
        guard text.utf8.count > 15 else { return text }
        return known.value(text) { $0 }
    }

    /// `path` as (folder, the rest), the folder interned; ("", path) without a '/' after its
    /// first byte.
    static func splitPath(_ path: String) -> (String, String) {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")), slash != path.utf8.startIndex else { return ("", path) }
        return (intern(String(path[..<slash])), String(path[path.index(after: slash)...]))
    }
}

/// A declaration's hash (``Fingerprint/of(_:)``: 16 lowercase hex digits) in 8 bytes; any other
/// text (tests name theirs "h1") is kept as it is.
struct CompactHash: Sendable, Equatable {
    private var digest: UInt64
    private var other: String?

    init(_ text: String) {
        if text.utf8.count == 16, text.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }), let v = UInt64(text, radix: 16) {
            digest = v
            other = nil
        } else {
            digest = 0
            other = text
        }
    }

    var text: String {
        if let other { return other }
        let hex = String(digest, radix: 16)
        return String(repeating: "0", count: 16 - hex.utf8.count) + hex
    }
}

/// Where a source's recipe is among the bytes its configuration's ``SourceBuilder`` keeps
/// (all of a load's recipes in one array: no allocation per source).
package struct SourceRecipe: Sendable, Equatable {
    package var offset: UInt32
    package var count: UInt32
    package init(offset: UInt32, count: UInt32) {
        self.offset = offset
        self.count = count
    }
}

/// Builds the provider of a source kept as a ``SourceConfig/recipe``, as the load that made the
/// recipe built it (the same settings and config hash; no file is read again).
package protocol SourceBuilder: Sendable {
    /// `source` with its provider built and no recipe.
    func build(_ source: SourceConfig) throws -> SourceConfig
}

/// The provider of a source kept as a recipe, until one is built: polling it is an error that
/// says so (the scheduler builds the provider before any poll).
/// With `why`, the reason it could not be built (every poll fails with it).
package struct UnbuiltProvider: Provider {
    package var why: String
    package init(why: String = "this source's provider is not built (it is built when this instance takes its lease)") { self.why = why }
    package func poll(_ context: PollContext) async throws -> PollResult { throw PollError(.transient, why) }
}
