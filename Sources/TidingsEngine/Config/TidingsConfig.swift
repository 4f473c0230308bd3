import Foundation
import TidingsPluginAPI

/// The whole loaded configuration: sources, sinks, routes and global limits.
public struct TidingsConfig: Sendable {
    /// The main config file this was loaded from.
    public var file: String
    public var pluginsDir: String
    /// `state_dir` from the file, if set (CLI and environment override it).
    public var stateDir: String?
    public var defaults: SourceSettings
    public var sources: [SourceConfig]
    public var sinks: [SinkConfig]
    public var routes: [Route]
    public var maxConcurrent: Int
    public var maxPerHost: Int
    public var historyDays: Int
    /// How long `run` waits for in-flight work on SIGTERM.
    public var shutdownTimeout: TimeInterval
    /// How long the outbox keeps retrying a delivery before it is dead.
    public var deliveryMaxAge: TimeInterval
    /// `dead_letter_days`: dead letters older than this are pruned (with their events, once
    /// those are older than ``historyDays``).
    public var deadLetterDays = 30
    /// `[http]`: where `/metrics`, `/-/healthy` and `/-/ready` are served; nil when off.
    public var http: HTTPSettings?
    /// Non-fatal findings (e.g. an API budget warning), printed at load.
    public var warnings: [String]
    /// `[state]`: SQLite in the state directory (the default) or a shared PostgreSQL database.
    public var state: StateSettings = .sqlite

    public func source(named name: String) -> SourceConfig? { sources.first { $0.name == name } }
    public func sink(named name: String) -> SinkConfig? { sinks.first { $0.name == name } }

    package init(file: String, pluginsDir: String, stateDir: String? = nil, defaults: SourceSettings, sources: [SourceConfig], sinks: [SinkConfig], routes: [Route], maxConcurrent: Int, maxPerHost: Int, historyDays: Int, shutdownTimeout: TimeInterval, deliveryMaxAge: TimeInterval, http: HTTPSettings? = nil, warnings: [String], state: StateSettings = .sqlite) {
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
