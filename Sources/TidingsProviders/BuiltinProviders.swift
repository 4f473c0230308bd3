import TidingsCore

/// The provider types that ship with tidings. The executable registers these; the core knows none by name.
public enum BuiltinProviders {
    /// Every built-in provider factory.
    public static var all: [ProviderFactory] {
        [
            SportdateProvider.factory,
            StatuspageProvider.factory,
            EconomicProvider.factory,
            AlertmanagerProvider.factory,
        ]
    }
}
