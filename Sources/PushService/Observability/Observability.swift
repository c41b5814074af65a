import PushCore
import PushAPI
import PushContracts
import PushJSON
import PushIngest
import Prometheus
import Synchronization

/// The service's metrics (SPEC §10, §11.13) in one Prometheus registry, readiness, and the
/// operator's summary behind `pushdispatch status`.
///
/// Counters are counted where things happen (ingestion, expiry, delivery) through swift-metrics
/// with this registry's factory; gauges (subscriptions by kind, outbox depth and oldest age,
/// paused applications) are read from the store and the dispatcher when `/metrics` is scraped.
/// The registry is the runtime's own, not swift-metrics' global one: several services can run
/// in one process (tests, the demo).
public final class Observability: SourceReadiness, Sendable {
    public let registry = PrometheusCollectorRegistry()
    public let metrics: LabelledMetrics
    let subscriptions: [SubscriptionKind: Gauge]
    let outboxDepth: Gauge
    let oldestAge: Gauge
    let appsPaused: Gauge
    let destinationsPaused: Gauge
    let apiConnectionsOpen: Gauge
    /// The API server's connections (``apiConnections(maximum:)``).
    let connections = Mutex<ConnectionCount?>(nil)
    /// Sources not attached yet (readiness waits for them).
    let unattached: Mutex<Set<String>>
    /// Sources that cannot take records in now, and why.
    let failures = Mutex<[String: String]>([:])
    /// Whether the store answers (its writers' failures, its probe's).
    public let storeHealth: StoreHealth
    let clock: any ServiceClock
    public let startedAt: Int64

    /// Buckets of `pushdispatch_delivery_latency_seconds`: from a loopback answer (1 and 2.5 ms
    /// tell a latency target of 10 ms from a miss) to the end of the 2-hour retry window.
    static let latencyBuckets: [Duration] = [
        .milliseconds(1), .microseconds(2500), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60), .seconds(300), .seconds(1800), .seconds(7200),
    ]

    /// The metrics of a service run with `configuration`: its sources' and providers' counters
    /// appear at 0 before their first event (a dashboard's rate needs the 0); readiness waits
    /// for its sources.
    convenience init(configuration: ServiceConfiguration, clock: any ServiceClock) {
        var sources: [String] = []
        if configuration.ingest.queueFile != nil { sources.append(QueueFileSource.name) }
        if configuration.ingest.socket != nil { sources.append(UnixSocketSource.name) }
        self.init(sources: sources, clock: clock)
        declare(sources: sources, providers: Self.providers(configuration))
    }

    /// The providers some application uses: `fcm`, `hms`, `harmonyos`, `apns`, `webpush`, `webhook`.
    static func providers(_ configuration: ServiceConfiguration) -> [String] {
        var providers: Set<String> = []
        for app in configuration.apps.values {
            if app.fcm != nil { providers.insert("fcm") }
            if app.hms != nil { providers.insert("hms") }
            if app.harmonyos != nil { providers.insert("harmonyos") }
            if app.apns != nil { providers.insert("apns") }
            if app.webpush != nil { providers.insert("webpush") }
            if !app.webhooks.isEmpty { providers.insert("webhook") }
        }
        return providers.sorted()
    }

    init(sources: [String], clock: any ServiceClock, storeHealth: StoreHealth = StoreHealth()) {
        self.storeHealth = storeHealth
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["pushdispatch_delivery_latency_seconds"] = Self.latencyBuckets
        metrics = LabelledMetrics(factory: factory)
        var subscriptions: [SubscriptionKind: Gauge] = [:]
        for kind in SubscriptionKind.allCases {
            subscriptions[kind] = registry.makeGauge(
                descriptor: Self.descriptor("pushdispatch_subscriptions", help: "Subscriptions stored, by kind"), labels: [("kind", kind.rawValue)])
        }
        self.subscriptions = subscriptions
        outboxDepth = registry.makeGauge(descriptor: Self.descriptor("pushdispatch_outbox_depth", help: "Notifications waiting for delivery"))
        oldestAge = registry.makeGauge(
            descriptor: Self.descriptor("pushdispatch_outbox_oldest_age_seconds", help: "Age of the oldest notification waiting (0 when none waits)"))
        appsPaused = registry.makeGauge(
            descriptor: Self.descriptor("pushdispatch_apps_paused", help: "Applications with a paused sender (credentials refused)"))
        destinationsPaused = registry.makeGauge(
            descriptor: Self.descriptor("pushdispatch_destinations_paused", help: "Webhooks and push services paused (they refuse our requests)"))
        apiConnectionsOpen = registry.makeGauge(
            descriptor: Self.descriptor("pushdispatch_api_connections_open", help: "HTTP connections the API server holds open"))
        unattached = Mutex(Set(sources))
        self.clock = clock
        startedAt = clock.now
    }

    /// The count of the API server's connections, bounded by `maximum` (`http.maxConnections`):
    /// each refused one counted in `pushdispatch_api_connections_refused_total`, those open in
    /// `pushdispatch_api_connections_open`.
    func apiConnections(maximum: Int) -> ConnectionCount {
        let metrics = self.metrics
        let count = ConnectionCount(maximum: maximum) { metrics.increment("pushdispatch_api_connections_refused_total", [], by: 1) }
        connections.withLock { $0 = count }
        return count
    }

    /// A gauge's name as SPEC §11.13 writes it, whole (no namespace or unit added).
    static func descriptor(_ name: String, help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    /// Makes the counters of the configured sources and providers appear at 0 before their
    /// first event (a dashboard's rate needs the 0).
    func declare(sources: [String], providers: [String]) {
        metrics.increment("pushdispatch_api_connections_refused_total", [], by: 0)
        for source in sources { metrics.increment("pushdispatch_records_ingested_total", [("source", source)], by: 0) }
        // Only the socket answers a resend as a duplicate (SPEC §4).
        if sources.contains(UnixSocketSource.name) {
            metrics.increment("pushdispatch_records_duplicate_total", [("source", UnixSocketSource.name)], by: 0)
        }
        for provider in providers {
            for outcome in ["delivered", "retry", "revoked", "discarded", "failed"] {
                metrics.increment("pushdispatch_deliveries_total", [("provider", provider), ("outcome", outcome)], by: 0)
            }
            metrics.increment("pushdispatch_retries_total", [("provider", provider)], by: 0)
        }
    }

    public func attached(_ source: String) {
        _ = unattached.withLock { $0.remove(source) }
    }

    public func failing(_ source: String, reason: String?) {
        failures.withLock { $0[source] = reason }
    }

    /// The Prometheus text exposition, gauges read now.
    func exposition(store: any IngestStore & SubscriptionStore, paused: [SenderKey]) async -> [UInt8] {
        if let counts = try? await store.countByKind() {
            for (kind, gauge) in subscriptions { gauge.set(Double(counts[kind] ?? 0)) }
        }
        if let summary = try? await store.outboxDepth() {
            outboxDepth.set(Double(summary.count))
            oldestAge.set(summary.oldest.map { Double(max(0, clock.now.saturatingSubtracting($0))) / 1_000 } ?? 0)
        }
        if let count = connections.withLock({ $0 }) { apiConnectionsOpen.set(Double(count.current.open)) }
        appsPaused.set(Double(Set(paused.filter { !$0.isDestination }.map(\.app)).count))
        destinationsPaused.set(Double(paused.filter(\.isDestination).count))
        return registry.emitToBuffer()
    }

    /// `nil` when ready; else why not: the store not answering or its writes held up, sources
    /// failing or not attached yet. A paused sender (an application's refused credentials, a
    /// destination refusing our requests) is not: this instance still does its work (the API,
    /// ingestion, every other sender), another instance would be paused the same way, and an
    /// orchestrator taking the instance out of service would take the API with it
    /// (docs/decisions.md, issue 33). `/status`, the metrics and the operations overview report
    /// it.
    func readiness() -> JSON? {
        let store = storeHealth.problems
        if !store.isEmpty {
            return [
                "status": "storeFailing",
                "store": .object(JSONObject(store.sorted { $0.key < $1.key }.map { (Key($0.key), JSON.string($0.value)) })),
            ]
        }
        let failing = failures.withLock { $0 }
        if !failing.isEmpty {
            return [
                "status": "sourceFailing",
                "sources": .object(JSONObject(failing.sorted { $0.key < $1.key }.map { (Key($0.key), JSON.string($0.value)) })),
            ]
        }
        let waiting = unattached.withLock { $0 }.sorted()
        if !waiting.isEmpty {
            return ["status": "starting", "waitingFor": .array(waiting.map { .string($0) })]
        }
        return nil
    }
}

extension JSON {
    /// An object from ordered pairs.
    static func members(_ pairs: [(String, JSON)]) -> JSON {
        let members: [(PushJSON.Key, JSON)] = pairs.map { pair in (PushJSON.Key(pair.0), pair.1) }
        return JSON.object(PushJSON.JSONObject(members))
    }
}
