import TidingsCore

/// Every sink type shipped with tidings. The core knows none of them by name.
public enum BuiltinSinks {
    public static var all: [SinkFactory] {
        [DesktopSink.factory, WebhookSink.factory, ExecSink.factory]
    }
}
