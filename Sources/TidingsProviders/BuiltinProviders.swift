import TidingsPluginAPI
import TidingsPOSIX

/// Every provider this build ships. The executable registers them; the core knows none by name.
public enum BuiltinProviders {
    /// Every built-in provider factory.
    public static var all: [ProviderFactory] {
        [
            HTTPJSONProvider.factory, ExecProvider.factory,
            SportdateProvider.factory, StatuspageProvider.factory, EconomicProvider.factory, AlertmanagerProvider.factory,
            FeedProvider.factory, PageProvider.factory, CertificateProvider.factory, GitHubProvider.factory,
            IMAPProvider.factory,
        ]
    }

    public static var registry: ProviderRegistry { ProviderRegistry(all) }
}
