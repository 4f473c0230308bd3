import Foundation

/// What a provider factory gets while a source is being configured.
public struct ProviderSetup: Sendable {
    /// The source's name (`plugins.d/NAME.toml` or `[sources.NAME]`).
    public var sourceName: String
    /// The plugins directory (exec commands resolve against it).
    public var pluginsDir: String
    /// The source's poll interval, for providers that warn about API budgets.
    public var interval: TimeInterval

    public init(sourceName: String, pluginsDir: String, interval: TimeInterval) {
        self.sourceName = sourceName
        self.pluginsDir = pluginsDir
        self.interval = interval
    }
}

/// A registered provider type: its name, defaults, and how to build one from options.
public struct ProviderFactory: Sendable {
    public typealias Make = @Sendable (_ options: OptionReader, _ setup: ProviderSetup, _ warn: (String) -> Void) throws -> any Provider

    /// The `provider = "…"` value.
    public var name: String
    /// One line for `--help` and docs.
    public var summary: String
    /// Default `flap_window` (an item that vanishes and returns within it is `changed`, not removed+new).
    public var defaultFlapWindow: TimeInterval
    public var make: Make

    public init(name: String, summary: String, defaultFlapWindow: TimeInterval = 0, make: @escaping Make) {
        self.name = name
        self.summary = summary
        self.defaultFlapWindow = defaultFlapWindow
        self.make = make
    }
}

/// Provider types by name. The core looks them up here and knows none of them itself.
public struct ProviderRegistry: Sendable {
    private var factories: [String: ProviderFactory] = [:]
    public init(_ factories: [ProviderFactory] = []) { factories.forEach { register($0) } }

    public mutating func register(_ f: ProviderFactory) { factories[f.name] = f }
    public func factory(named name: String) -> ProviderFactory? { factories[name] }
    public var names: [String] { factories.keys.sorted() }
}
