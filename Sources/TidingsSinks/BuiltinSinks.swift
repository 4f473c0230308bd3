import TidingsPOSIX
import TidingsPluginAPI

/// Every sink type this build ships. The executable registers them; the core knows none by name.
package enum BuiltinSinks {
    /// The factories, for ``SinkRegistry``.
    package static var all: [SinkFactory] {
        [
            StdoutSink.factory, DesktopSink.factory, WebhookSink.factory, ExecSink.factory,
            NtfySink.factory, GotifySink.factory, PushoverSink.factory,
            TelegramSink.factory, SlackSink.factory, DiscordSink.factory,
            EmailSink.factory, MatrixSink.factory, AppriseSink.factory,
        ]
    }

    /// A registry with every built-in sink type.
    package static var registry: SinkRegistry { SinkRegistry(all) }
}
