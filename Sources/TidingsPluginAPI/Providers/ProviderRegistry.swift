import FoundationEssentials

/// What a provider factory gets while a source is being configured.
package struct ProviderSetup: Sendable {
    /// The source's name (`plugins.d/NAME.toml` or `[sources.NAME]`).
    package var sourceName: String
    /// The plugins directory (exec commands resolve against it).
    package var pluginsDir: String
    /// The source's poll interval, for providers that warn about API budgets.
    package var interval: TimeInterval

    package init(sourceName: String, pluginsDir: String, interval: TimeInterval) {
        self.sourceName = sourceName
        self.pluginsDir = pluginsDir
        self.interval = interval
    }
}

/// A registered provider type: its name, defaults, and how to build one from options.
package struct ProviderFactory: Sendable {
    package typealias Make = @Sendable (_ options: OptionReader, _ setup: ProviderSetup, _ warn: (String) -> Void) throws -> any Provider

    /// The `provider = "…"` value.
    package var name: String
    /// One line for `--help` and docs.
    package var summary: String
    /// Default `flap_window` (an item that vanishes and returns within it is `changed`, not removed+new).
    package var defaultFlapWindow: TimeInterval
    package var make: Make

    package init(name: String, summary: String, defaultFlapWindow: TimeInterval = 0, make: @escaping Make) {
        self.name = name
        self.summary = summary
        self.defaultFlapWindow = defaultFlapWindow
        self.make = make
    }
}

/// Provider types by name. The core looks them up here and knows none of them itself.
package struct ProviderRegistry: Sendable {
    private var factories: [String: ProviderFactory] = [:]
    package init(_ factories: [ProviderFactory] = []) { factories.forEach { register($0) } }

    package mutating func register(_ f: ProviderFactory) { factories[f.name] = f }
    package func factory(named name: String) -> ProviderFactory? { factories[name] }
    package var names: [String] { factories.keys.sorted() }
}
