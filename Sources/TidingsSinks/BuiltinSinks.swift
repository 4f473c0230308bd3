import TidingsCore

/// Every sink type this build ships. The executable registers them; the core knows none by name.
public enum BuiltinSinks {
    public static var all: [SinkFactory] {
        [StdoutSink.factory]
    }

    public static var registry: SinkRegistry { SinkRegistry(all) }
}
