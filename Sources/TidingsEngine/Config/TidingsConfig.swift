import FoundationEssentials
import TidingsPluginAPI

/// The whole loaded configuration: sources, sinks, routes and global limits.
package struct TidingsConfig: Sendable {
    /// The main config file this was loaded from.
    package var file: String
    package var pluginsDir: String
    /// `state_dir` from the file, if set (CLI and environment override it).
    package var stateDir: String?
    package var defaults: SourceSettings
    package var sources: [SourceConfig]
    package var sinks: [SinkConfig]
    package var routes: [Route]
    package var maxConcurrent: Int
    package var maxPerHost: Int
    package var historyDays: Int
    /// How long `run` waits for in-flight work on SIGTERM.
    package var shutdownTimeout: TimeInterval
    /// How long the outbox keeps retrying a delivery before it is dead.
    package var deliveryMaxAge: TimeInterval
    /// `dead_letter_days`: dead letters older than this are pruned (with their events, once
    /// those are older than ``historyDays``).
    package var deadLetterDays = 30
    /// `[http]`: where `/metrics`, `/-/healthy` and `/-/ready` are served; nil when off.
    package var http: HTTPSettings?
    /// Non-fatal findings (e.g. an API budget warning), printed at load.
    package var warnings: [String]
    /// `[state]`: SQLite in the state directory (the default) or a shared PostgreSQL database.
    package var state: StateSettings = .sqlite
    /// Builds the providers of sources kept as recipes (``SourceConfig/recipe``); nil where none is.
    package var builder: (any SourceBuilder)?

    package func source(named name: String) -> SourceConfig? { sources.first { $0.name == name } }
    package func sink(named name: String) -> SinkConfig? { sinks.first { $0.name == name } }

    package init(
        file: String, pluginsDir: String, stateDir: String? = nil, defaults: SourceSettings, sources: [SourceConfig], sinks: [SinkConfig], routes: [Route],
        maxConcurrent: Int, maxPerHost: Int, historyDays: Int, shutdownTimeout: TimeInterval, deliveryMaxAge: TimeInterval, http: HTTPSettings? = nil,
        warnings: [String], state: StateSettings = .sqlite
    ) {
        self.file = file
        self.pluginsDir = pluginsDir
        self.stateDir = stateDir
        self.defaults = defaults
        self.sources = sources
        self.sinks = sinks
        self.routes = routes
        self.maxConcurrent = maxConcurrent
        self.maxPerHost = maxPerHost
        self.historyDays = historyDays
        self.shutdownTimeout = shutdownTimeout
        self.deliveryMaxAge = deliveryMaxAge
        self.http = http
        self.warnings = warnings
        self.state = state
    }
}
