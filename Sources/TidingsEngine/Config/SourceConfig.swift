import FoundationEssentials
import TidingsPluginAPI

/// Settings every source has, whatever its provider (DESIGN §3). `[defaults]` supplies them.
package struct SourceSettings: Sendable, Equatable {
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

    static let keys = ["interval", "jitter", "timeout", "error_threshold", "max_backoff", "max_body", "notify_existing", "enabled", "notice_ttl", "max_events", "refuse_private_redirects", "group"]

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
package struct SourceConfig: Sendable {
    package var name: String
    package var provider: String
    package var settings: SourceSettings
    package var flapWindow: TimeInterval
    package var instance: any Provider
    /// Where it was declared, for messages.
    package var file: String
    package var line: Int?
    /// Hash of the source's declaration: a reload with a different hash clears `auth-failed`.
    package var configHash: String
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
        self.provider = provider
        self.settings = settings
        self.flapWindow = flapWindow
        self.instance = instance
        self.file = file
        self.line = line
        self.configHash = configHash
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
