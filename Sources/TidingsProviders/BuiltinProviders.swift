import TidingsCore

/// Every provider this build ships. The executable registers them; the core knows none by name.
public enum BuiltinProviders {
    public static var all: [ProviderFactory] {
        [HTTPJSONProvider.factory, ExecProvider.factory]
    }

    public static var registry: ProviderRegistry { ProviderRegistry(all) }
}
