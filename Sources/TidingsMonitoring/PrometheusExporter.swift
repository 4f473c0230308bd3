import Metrics
import Prometheus
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI

/// The Prometheus side of ``TidingsMetrics``: a registry behind swift-metrics, bootstrapped
/// once per process (swift-metrics allows one bootstrap; a reload must not do it again), and
/// its text exposition for `GET /metrics`.
package enum PrometheusExporter {
    private static let registry = PrometheusCollectorRegistry()

    /// Installs the exporter as the process's metrics backend, and `tidings_build_info`. Only
    /// the first call does anything.
    package static func bootstrap() { _ = bootstrapped }

    private static let bootstrapped: Void = {
        MetricsSystem.bootstrap(DescribedFactory(registry: registry))
        TidingsMetrics.started(version: TidingsVersion.string)
    }()

    /// The Prometheus text exposition format (version 0.0.4).
    package static func exposition() -> [UInt8] { registry.emitToBuffer() }

    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"
}

/// swift-metrics onto the registry, with the `# HELP` text and buckets of each
/// ``TidingsMetrics/Family`` (swift-prometheus's own factory writes no HELP lines).
private struct DescribedFactory: MetricsFactory {
    let registry: PrometheusCollectorRegistry
    private let families = Dictionary(uniqueKeysWithValues: TidingsMetrics.families.map { ($0.name, $0) })
    /// For histograms not defined in ``TidingsMetrics`` (none today; a library might add one).
    private static let defaultBuckets: [Double] = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10]

    init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    private func descriptor(_ label: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: label, unitName: "", helpText: families[label]?.help ?? "")
    }

    private func buckets(_ label: String) -> [Double] {
        if case .histogram(let b)? = families[label]?.kind { return b }
        return Self.defaultBuckets
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: descriptor(label), labels: dimensions) }
        return registry.makeValueHistogram(descriptor: descriptor(label), labels: dimensions, buckets: buckets(label))
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(descriptor: descriptor(label), labels: dimensions, buckets: buckets(label).map { .nanoseconds(Int64($0 * 1e9)) })
    }

    func destroyCounter(_ handler: any CounterHandler) {
        if let c = handler as? Prometheus.Counter { registry.unregisterCounter(c) }
    }

    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let c = handler as? Prometheus.Counter { registry.unregisterCounter(c) }
    }

    func destroyRecorder(_ handler: any RecorderHandler) {
        if let g = handler as? Prometheus.Gauge { registry.unregisterGauge(g) }
        if let h = handler as? ValueHistogram { registry.unregisterValueHistogram(h) }
    }

    func destroyMeter(_ handler: any MeterHandler) {
        if let g = handler as? Prometheus.Gauge { registry.unregisterGauge(g) }
    }

    func destroyTimer(_ handler: any TimerHandler) {
        if let h = handler as? DurationHistogram { registry.unregisterDurationHistogram(h) }
    }
}
