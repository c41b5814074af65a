import Foundation
import Hummingbird
import Logging
import PushAPI
import PushCore
import PushContracts
import PushJSON
import PushDelivery
import PushEngine
import PushIngest
import PushJOSE
import PushStore
import ServiceLifecycle
import Synchronization

/// The composition root: configuration → the deployment (``Deployments``) → the parts every
/// deployment shares → one `ServiceGroup`, its services listed in the order they start.
public struct ServiceRuntime: Sendable {
    /// What tests and benchmarks tune; the service runs with the defaults.
    public struct Tuning: Sendable {
        /// How often changes made by others are applied to the index. Default 1 s.
        public var followInterval: Duration
        /// Deadlines and sizes of client connections to the REST API.
        public var connectionLimits: ConnectionLimits
        /// Batch sizes of ingestion.
        public var ingest: Ingestor.Configuration
        /// A tree snapshot is due after this many journalled bytes. Default:
        /// `ingest.snapshotAfter` (tests make it small).
        public var snapshotAfterBytes: Int?
        public init(
            followInterval: Duration = .seconds(1), connectionLimits: ConnectionLimits = .standard, ingest: Ingestor.Configuration = .init(),
            snapshotAfterBytes: Int? = nil
        ) {
            self.followInterval = followInterval
            self.connectionLimits = connectionLimits
            self.ingest = ingest
            self.snapshotAfterBytes = snapshotAfterBytes
        }
    }

    public let configuration: ServiceConfiguration
    public let logger: Logger
    /// The one clock of the service (tests pass a manual one).
    public let clock: any ServiceClock
    public let tuning: Tuning

    public init(configuration: ServiceConfiguration, logger: Logger, clock: any ServiceClock = SystemClock(), tuning: Tuning = Tuning()) {
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        self.tuning = tuning
    }

    /// Runs until SIGTERM or SIGINT (or until the task is cancelled, or `stopper` stops it).
    /// `onListening` receives the HTTP port once the server accepts connections.
    public func run(onListening: @escaping @Sendable (Int) async -> Void = { _ in }, stopper: ServiceStopper? = nil) async throws {
        let applications = try Self.applications(configuration)
        let deployment = try await Deployments.open(configuration, logger: logger)
        let store = deployment.store
        defer { store.close() }

        // What every deployment shares: keys, the index, metrics, the delivery worker.
        let serviceKeys = try await ServiceKey.loadOrCreate(in: store)
        let sealers = try PreparedApplication.sealers(applications, serviceKey: serviceKeys.last!)
        for warning in configuration.warnings { logger.warning("\(warning)") }
        // Subscriptions created or changed wake the record engine (their read access is checked
        // before records reach them).
        let queue = IngestQueue()
        let readingData = Set(applications.filter { $0.value.settings.rules?.readsData == true }.keys)
        // Rules that read data or use `now`: new subscriptions are admitted by the engine, and
        // checked again as writes reach them.
        let rechecked = Set(applications.filter { $0.value.settings.rules?.rechecked == true }.keys)
        let registry = SubscriptionRegistry(store: store, admitting: rechecked, admissionsWaiting: queue, logger: logger)
        try await registry.load()
        logger.info("subscriptions loaded", metadata: ["count": "\(registry.count)", "store": "\(store.location)"])
        try await LegacyRevocations.requeue(store: store, sealers: sealers, now: clock.now, logger: logger)
        let observability = Observability(configuration: configuration, clock: clock)
        let deliveries = DeliveryCounters(metrics: observability.metrics, clock: clock)
        let ingestCounters = IngestCounters(metrics: observability.metrics)
        // OpenTelemetry traces, when the environment asks for them (OTEL_TRACES_EXPORTER=otlp);
        // before the senders, whose HTTP clients must be shut down once made.
        let tracing = try TracingSetup.make(environment: ProcessInfo.processInfo.environment, logger: logger)
        let senders = try await ConfiguredSenders(configuration, clock: clock, counters: deliveries, metrics: observability.metrics)
        // The senders hold the HTTP clients: they are shut down however the run ends.
        func serve() async throws {
            let dispatcher = Dispatcher(
                store: store, senders: senders.table, configuration: configuration.delivery.dispatcher(
                    claimant: deployment.instance, alone: deployment.releasesEveryClaimAtStart, keepsHistory: configuration.operations.history.isOn,
                    share: deployment.instanceShare, apps: configuration.apps),
                notices: RejectionNotices(store: store, sealers: sealers, logger: logger), index: registry, clock: clock, counters: deliveries,
                tenure: deployment.claimTenure, traces: tracing?.traces, logger: logger)
            let stored = try await store.checkpoints()
            let trees = deployment.treeView(clock: clock)
            let parts = ServiceParts(
                configuration: configuration, applications: applications, registry: registry, sealers: sealers, queue: queue,
                checkpoints: Dictionary(stored.map { ($0.source, $0) }, uniquingKeysWith: { $1 }),
                deadLetters: DeadLetterFile(path: configuration.ingest.deadLetter, maxSize: configuration.ingest.deadLetterMaxSize, logger: logger),
                counters: ingestCounters, health: observability.storeHealth, delivery: dispatcher,
                address: AdvertisedAddress(configuration.http.advertised), view: readingData.isEmpty ? nil : trees, clock: clock,
                report: { [table = senders.table] in
                    DeploymentOverview.bytes(DeploymentOverview.report(dispatcher: dispatcher, senders: table, ingest: ingestCounters, now: clock.now))
                },
                resume: { _ = dispatcher.resume($0) }, tuning: tuning, traces: tracing?.traces,
                logger: logger)

            // What differs: how records are processed.
            let processing = try await deployment.processing(parts)

            let sweeper = ExpirySweeper(
                store: store, index: registry, outbox: processing.outbox, sealers: sealers, interval: configuration.expiry.interval, clock: clock,
                metrics: observability.metrics, logger: logger)
            let follower = ChangeFollower(store: store, registry: registry, interval: tuning.followInterval, clock: clock, logger: logger)
            let syncer = IndexSyncer(registry: registry, logger: logger)
            let probe = StoreProbe(store: store, health: observability.storeHealth)
            let sources = Self.sources(configuration, parts: parts, deployment: deployment, readiness: observability)
            let pruner = HistoryPruner(store: store, limits: configuration.operations.history, clock: clock, logger: logger)
            let operations = Operations(
                instance: deployment.instance, observability: observability, store: store, dispatcher: dispatcher, deliveries: deliveries,
                ingest: ingestCounters, cluster: processing.cluster)
            let console = OperationsConsole(
                store: store, dispatcher: dispatcher, senders: senders.table, operations: operations, rules: applications.mapValues(\.readRules), trees: trees, clock: clock,
                historyLimits: configuration.operations.history, deadLetterPath: configuration.ingest.deadLetter,
                queueFile: configuration.ingest.queueFile, maxRecordBytes: configuration.ingest.maxRecordBytes, queue: queue, checkpoints: store)
            let server = APIServer(
                configuration: configuration, applications: applications.mapValues { $0.api(trees: trees, clock: clock) }, store: store,
                index: registry, clock: clock,
                jwks: Self.publishedKeys(serviceKeys: serviceKeys, applications: applications),
                operations: operations, console: console,
                operationsToken: configuration.http.operationsToken, address: parts.address, limits: Self.limits(tuning.connectionLimits, configuration.http), onListening: onListening, logger: logger
            ).application()

            // A graceful shutdown stops services in reverse order: the API, then the sources (no
            // more input) and the intake, then the index and the sweeper, then the processing,
            // which commits what was taken, then the delivery worker, which waits for the answers
            // of the sends in flight (each has its deadline) and stores them, and last what must
            // outlive it (a shared instance's lease keeper).
            // The exporter first: started first, it is stopped last, once every span has ended.
            var services: [any Service] = tracing.map { [$0.service] } ?? []
            services += processing.lifetime
            if configuration.delivery.enabled { services.append(dispatcher) }
            services += processing.records
            services += [sweeper, follower, syncer, probe, pruner] as [any Service]
            services += processing.intake
            services += sources
            services.append(server)
            // Last: told first when a graceful stop begins, it dates it.
            let watch = ShutdownWatch(onShutdown: { dispatcher.feed.finish() })
            services.append(watch)
            var groupConfiguration = ServiceGroupConfiguration(
                services: services.map { .init(service: $0) }, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            // Past the deadline the group cancels what is left: a write held up by a store that
            // is away gives up (its records were not acknowledged), and the run fails below.
            groupConfiguration.maximumGracefulShutdownDuration = configuration.shutdownTimeout
            let group = ServiceGroup(configuration: groupConfiguration)
            stopper?.attach(group)
            var failure: (any Error)?
            do {
                try await group.run()
            } catch {
                failure = error
            }
            if let began = watch.began, began.duration(to: .now) >= configuration.shutdownTimeout {
                let error = ShutdownTimedOut(timeout: configuration.shutdownTimeout, cause: failure.map { "\($0)" })
                logger.error("\(error)")
                throw error
            }
            if let failure { throw failure }
        }
        do {
            try await serve()
        } catch {
            try? await senders.shutdown()
            throw error
        }
        try? await senders.shutdown()
        logger.info("stopped")
    }

    /// The configured sources, each resumed from its checkpoint.
    static func sources(_ configuration: ServiceConfiguration, parts: ServiceParts, deployment: any Deployment, readiness: any SourceReadiness)
        -> [any Service]
    {
        var sources: [any Service] = []
        if let path = configuration.ingest.queueFile {
            let checkpoint = parts.checkpoints[deployment.checkpointKey(QueueFileSource.name)]
            sources.append(
                QueueFileSource(
                    path: path, queue: parts.queue, checkpoint: checkpoint, maxLineBytes: parts.configuration.ingest.maxRecordBytes, readiness: readiness,
                    logger: parts.logger))
        }
        if let path = configuration.ingest.socket {
            sources.append(
                UnixSocketSource(
                    path: path, queue: parts.queue, maxLineBytes: parts.configuration.ingest.maxRecordBytes, limits: configuration.ingest.socketLimits,
                    readiness: readiness, logger: parts.logger))
        }
        return sources
    }

    /// What `run` checks before it opens anything: every application prepared (keys, signing
    /// key, authentication, service-account files). Throws ``ConfigurationError``.
    /// The API server's limits: the tuning's deadlines, the configuration's connection bound
    /// (or the tuning's, when lower: tests).
    static func limits(_ tuning: ConnectionLimits, _ http: ServiceConfiguration.HTTP) -> ConnectionLimits {
        var limits = tuning
        limits.maxConnections = min(tuning.maxConnections, http.maxConnections)
        return limits
    }

    public static func check(_ configuration: ServiceConfiguration) throws {
        _ = try applications(configuration)
    }

    /// Checks and prepares every application (see ``PreparedApplication``).
    static func applications(_ configuration: ServiceConfiguration) throws -> [String: PreparedApplication] {
        try PreparedApplication.prepareAll(configuration, authentication: true)
    }

    /// What `/.well-known/jwks.json` publishes: the service's keys, and the public part of the
    /// applications' asymmetric signing keys (secret HS256 keys are never published).
    static func publishedKeys(serviceKeys: [JWK], applications: [String: PreparedApplication]) -> JSON {
        var keys = serviceKeys
        for id in applications.keys.sorted() {
            if let key = applications[id]?.signingKey, key.publicJSON != nil { keys.append(key) }
        }
        return ServiceKey.publicJWKSet(keys)
    }
}

/// Dates the start of a graceful stop: the last service of the group, so the first told. It
/// then ends what would hold the HTTP server's stop (the operations API's event streams).
final class ShutdownWatch: Service, Sendable {
    private let state = Mutex<ContinuousClock.Instant?>(nil)
    let onShutdown: @Sendable () -> Void

    init(onShutdown: @escaping @Sendable () -> Void = {}) {
        self.onShutdown = onShutdown
    }

    var began: ContinuousClock.Instant? { state.withLock { $0 } }

    func run() async throws {
        try? await gracefulShutdown()
        if !Task.isCancelled { state.withLock { $0 = .now } }
        onShutdown()
    }
}

/// A graceful stop that did not end within `instance.shutdownTimeout`: what was left was
/// cancelled. `run` fails with it, so that a supervisor sees the stop was not clean.
public struct ShutdownTimedOut: Error, CustomStringConvertible {
    public var timeout: Duration
    public var cause: String?

    public var description: String {
        "the graceful stop took longer than instance.shutdownTimeout (\(timeout)): what was left was cancelled; "
            + "records not acknowledged are sent again by their clients, deliveries in flight are retried at the next start"
            + (cause.map { " (\($0.prefix(300)))" } ?? "")
    }
}
