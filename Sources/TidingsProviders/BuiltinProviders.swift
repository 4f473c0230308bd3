import TidingsPOSIX
import TidingsPluginAPI

/// Every provider this build ships. The executable registers them; the core knows none by name.
package enum BuiltinProviders {
    /// Every built-in provider factory.
    package static var all: [ProviderFactory] {
        [
            HTTPJSONProvider.factory, ExecProvider.factory,
            SportdateProvider.factory, StatuspageProvider.factory, EconomicProvider.factory, AlertmanagerProvider.factory,
            FeedProvider.factory, PageProvider.factory, CertificateProvider.factory, GitHubProvider.factory,
            IMAPProvider.factory,
        ]
    }

    package static var registry: ProviderRegistry { ProviderRegistry(all) }
}
