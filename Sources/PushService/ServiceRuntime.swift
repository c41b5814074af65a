import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization
import PushAPI
import PushCore
import PushDelivery
import PushIngest
import PushJOSE
import PushStore
import ServiceLifecycle

/// The composition root: configuration → store, index, trees, ingest sources, pipeline, API,
/// sweeper → one `ServiceGroup`.
public struct ServiceRuntime: Sendable {
    public let configuration: ServiceConfiguration
    public let logger: Logger
    /// Unix seconds now (tests move it).
    public let clock: @Sendable () -> Int64
    /// Milliseconds since the epoch now (notification times).
    public let clockMilliseconds: @Sendable () -> Int64
    /// How often changes made by others are applied to the index.
    public let followInterval: Duration
    /// Deadlines and sizes of client connections to the REST API.
    public let connectionLimits: ConnectionLimits
    /// What timers sleep on (the expiry sweeper's interval); tests pass a manual clock.
    public let timerClock: any Clock<Duration>
    /// Batch and snapshot sizes of ingestion (tests make snapshots small).
    let ingestConfiguration: Ingestor.Configuration

    public init(
        configuration: ServiceConfiguration, logger: Logger,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }, followInterval: Duration = .seconds(1),
        connectionLimits: ConnectionLimits = .standard, timerClock: any Clock<Duration> = ContinuousClock(),
        clockMilliseconds: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
    ) {
        self.init(
            configuration: configuration, logger: logger, clock: clock, followInterval: followInterval, connectionLimits: connectionLimits,
            timerClock: timerClock, clockMilliseconds: clockMilliseconds,
            ingestConfiguration: .init(snapshotAfterBytes: configuration.ingest.snapshotAfter))
    }

    init(
        configuration: ServiceConfiguration, logger: Logger, clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        followInterval: Duration = .seconds(1), connectionLimits: ConnectionLimits = .standard,
        timerClock: any Clock<Duration> = ContinuousClock(),
        clockMilliseconds: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
        ingestConfiguration: Ingestor.Configuration
    ) {
        self.ingestConfiguration = ingestConfiguration
        self.timerClock = timerClock
        self.clockMilliseconds = clockMilliseconds
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        self.followInterval = followInterval
        self.connectionLimits = connectionLimits
    }

    /// Opens the configured store, migrating its schema (PostgreSQL: under an advisory lock, so
    /// that of instances starting together one migrates).
    public static func openStore(_ configuration: ServiceConfiguration, logger: Logger = Logger(label: "pushdispatch")) async throws
        -> any RuntimeStore
    {
        switch configuration.store {
        case .sqlite(let path):
            return try SQLiteStore(path: path)
        case .postgres(let url):
            return try await PostgresStore.open(url: url, logger: logger)
        }
    }

    /// Runs until SIGTERM or SIGINT (or until the task is cancelled). `onListening` receives the
    /// HTTP port once the server accepts connections.
    public func run(onListening: @escaping @Sendable (Int) async -> Void = { _ in }, stopper: ServiceStopper? = nil) async throws {
        let store = try await Self.openStore(configuration, logger: logger)
        // PostgreSQL: one of several instances sharing the database (docs/scaling-out.md).
        let cluster = store as? PostgresStore
        defer { cluster?.close() }
        let instance = configuration.instanceName
        let serviceKeys = try await ServiceKey.loadOrCreate(in: store)
        let applications = try Self.applications(configuration)
        let registry = SubscriptionRegistry(store: store, logger: logger)
        try await registry.load()
        logger.info(
            "subscriptions loaded", metadata: ["count": "\(registry.count)", "store": "\(store.location)"])

        let jwks = Self.publishedKeys(serviceKeys: serviceKeys, applications: applications)
        var sourceNames: [String] = []
        if configuration.ingest.queueFile != nil { sourceNames.append(QueueFileSource.name) }
        if configuration.ingest.socket != nil { sourceNames.append(UnixSocketSource.name) }
        let observability = Observability(sources: sourceNames, now: clockMilliseconds)
        observability.declare(sources: sourceNames, providers: Self.providers(configuration))
        let counters = DeliveryCounters(metrics: observability.metrics, now: clockMilliseconds)
        let ingestCounters = IngestCounters(metrics: observability.metrics)
        let paused = PausedApplications()
        let api = SubscriptionAPI(
            store: store, applications: applications.mapValues(\.api), clock: clock,
            // Read-your-writes: the answer to a subscription change waits until the index has
            // it, so a record written after the answer is matched against it.
            didChange: {
                do { try await registry.sync() } catch { registry.nudge() }
            }, jwks: { jwks }, readiness: { observability.readiness(paused: paused.applications) }, logger: logger)
        let logger = self.logger
        let router = api.router()
        // Delivery claims are filed under the instance's name when instances share the store (a
        // restart then releases its own), under host and process alone.
        let claimant = cluster != nil ? instance : "\(ProcessInfo.processInfo.hostName)-\(ProcessInfo.processInfo.processIdentifier)"
        router.get("metrics") { _, _ in
            let text = await observability.exposition(store: store, paused: paused.applications)
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: text)))
        }
        router.get("status") { _, _ in
            let document = await OperatorStatus.document(
                instance: claimant, observability: observability, store: store, deliveries: counters, ingest: ingestCounters,
                paused: paused.details)
            var writer = JSONWriter(capacity: 2048)
            writer.write(document)
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: writer.bytes)))
        }
        let keeperBox = Mutex<LeaseKeeper?>(nil)  // several instances: its address is the port listened on
        let configuration = self.configuration
        let server = Application(
            router: router,
            server: SubscriptionAPI.server(limits: connectionLimits),
            configuration: .init(address: .hostname(configuration.http.host, port: configuration.http.port), serverName: "pushdispatch"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                keeperBox.withLock { keeper in keeper?.address.withLock { $0 = Self.advertised(host: configuration.http.host, port: port) } }
                logger.info("listening", metadata: ["host": "\(channel.localAddress?.ipAddress ?? "?")", "port": "\(port)"])
                await onListening(port)
            },
            logger: logger)
        let sealers = try PreparedApplication.sealers(applications, serviceKey: serviceKeys.last!)
        try await Self.requeueLegacyRevocations(store: store, sealers: sealers, now: clockMilliseconds(), logger: logger)

        // Ingestion: trees restored, sources resumed from their checkpoints. Several instances:
        // the trees are loaded by the owners of their applications instead, and the sources'
        // checkpoints are filed under this instance's name.
        let loaded = cluster == nil ? try await TreeLoader.load(from: store, logger: logger) : TreeLoader.Loaded()
        let stored = Dictionary(try await store.checkpoints().map { ($0.source, $0) }, uniquingKeysWith: { $1 })
        let sourceKey: @Sendable (String) -> String = { cluster == nil ? $0 : Cluster.sourceKey(instance: instance, source: $0) }
        let checkpoints = Dictionary(
            uniqueKeysWithValues: [QueueFileSource.name, UnixSocketSource.name].compactMap { name in
                stored[sourceKey(name)].map { (name, SourceCheckpoint(source: name, lastSeq: $0.lastSeq, position: $0.position, fileIdentity: $0.fileIdentity)) }
            })
        let settings = applications.mapValues(\.settings)
        let pipeline = RecordPipeline(
            processor: loaded.processor, watermarks: cluster == nil ? checkpoints.compactMapValues(\.lastSeq) : [:],
            settings: { settings[$0] ?? .standard })
        let queue = IngestQueue()
        let deadLetters = DeadLetterFile(path: configuration.ingest.deadLetter)
        var ingestor = Ingestor(
            queue: queue, store: store, registry: registry, sealers: sealers, deadLetters: deadLetters, initial: pipeline, loaded: loaded,
            configuration: ingestConfiguration, now: clockMilliseconds, logger: logger)
        ingestor.counters = ingestCounters
        var sources: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let path = configuration.ingest.queueFile {
            var source = QueueFileSource(path: path, queue: queue, checkpoint: checkpoints[QueueFileSource.name], logger: logger)
            source.onAttached = { observability.attached(QueueFileSource.name) }
            sources.append(.init(service: source))
        }
        if let path = configuration.ingest.socket {
            var source = UnixSocketSource(path: path, queue: queue, logger: logger)
            source.onAttached = { observability.attached(UnixSocketSource.name) }
            sources.append(.init(service: source))
        }
        // Delivery: one shared HTTP client, a sender per application and provider, the worker.
        let transport = try AsyncHTTPTransport(clients: 4, caFile: configuration.delivery.caFile)
        let context = SenderContext(transport: transport, timeout: configuration.delivery.timeout, now: clockMilliseconds, counters: counters)
        let senders: ConfiguredSenders
        do {
            senders = try ConfiguredSenders(configuration, context: context)
        } catch {
            try? await transport.shutdown()
            throw error
        }
        let notices = RejectionNotices(store: store, sealers: sealers, logger: logger)
        let dispatcher = Dispatcher(
            store: store, senders: senders,
            configuration: .init(
                retry: configuration.delivery.retryPolicy, perProvider: configuration.delivery.perProvider, perApp: configuration.delivery.perApp,
                claimant: claimant, releaseAllAtStart: cluster == nil),
            revokeNotice: { await notices.notice(for: $0) }, now: clockMilliseconds, clock: timerClock, counters: counters, logger: logger,
            onRevoked: { _ in registry.nudge() })
        paused.dispatcher.withLock { $0 = dispatcher }
        ingestor.didQueue = {
            dispatcher.nudge()
            // The other instances' workers too.
            if let cluster { Task { await cluster.notifyOutbox() } }
        }

        var sweeper = ExpirySweeper(
            store: store, registry: registry, sealers: sealers, interval: configuration.expiry.interval, now: clock,
            nowMilliseconds: clockMilliseconds, clock: timerClock, logger: logger)
        sweeper.didQueue = { dispatcher.nudge() }
        sweeper.metrics = observability.metrics
        let follower = ChangeFollower(store: store, registry: registry, interval: followInterval, logger: logger)
        let syncer = IndexSyncer(registry: registry, logger: logger)

        // What processes records: the ingestor on a store of its own; with several instances,
        // the intake into the shared inbox, the lease keeper, the owner of the applications this
        // instance holds, and the listener that wakes them.
        var processing: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: ingestor)]
        var intake: [ServiceGroupConfiguration.ServiceConfiguration] = []
        var lifetime: [ServiceGroupConfiguration.ServiceConfiguration] = []  // stopped last
        if let cluster {
            let wake = Wakeup()
            let address = Self.advertised(host: configuration.http.host, port: configuration.http.port)
            try await cluster.registerStart(instance: instance, address: address)
            let keeper = LeaseKeeper(
                store: cluster, instance: instance, address: address, applications: applications.keys.sorted(), logger: logger,
                changed: { wake.signal() }, everyRound: { dispatcher.nudge() })
            keeperBox.withLock { $0 = keeper }
            let owner = ApplicationOwner(store: cluster, leases: keeper, ingestor: ingestor, wake: wake, logger: logger)
            let listener = ClusterListener(store: cluster, logger: logger) { channel, payload in
                if channel == PostgresStore.subscriptionChannel {
                    registry.nudge()
                } else if payload == "inbox" {
                    wake.signal()
                } else if payload == "outbox" {
                    dispatcher.nudge()
                }
            }
            processing = [.init(service: owner), .init(service: listener)]
            lifetime = [.init(service: keeper)]
            intake = [
                .init(
                    service: InboxIntake(
                        queue: queue, store: cluster, deadLetters: deadLetters, instance: instance,
                        initialWatermarks: Dictionary(
                            uniqueKeysWithValues: checkpoints.compactMap { name, checkpoint in checkpoint.lastSeq.map { (sourceKey(name), $0) } }),
                        maxLineBytes: ingestConfiguration.maxLineBytes, counters: ingestCounters, now: clockMilliseconds, logger: logger))
            ]
        }
        // A graceful shutdown stops services in reverse order: the API, then the sources (no
        // more input), then the rest, then the ingestor, which commits what was queued, and
        // last the delivery worker, which waits for the answers of the sends in flight (each
        // has its deadline) and stores them.
        let group = ServiceGroup(
            configuration: .init(
                services: lifetime + (configuration.delivery.enabled ? [.init(service: dispatcher)] : []) + processing
                    + [.init(service: sweeper), .init(service: follower), .init(service: syncer)] + intake + sources + [.init(service: server)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        stopper?.attach(group)
        do {
            try await group.run()
        } catch {
            try? await transport.shutdown()
            throw error
        }
        try? await transport.shutdown()
        logger.info("stopped")
    }

    /// Where others reach this instance: the host listened on, or the host name when it
    /// listens on every interface.
    static func advertised(host: String, port: Int) -> String {
        (["0.0.0.0", "::", ""].contains(host) ? ProcessInfo.processInfo.hostName : host) + ":\(port)"
    }

    /// Revocations a version-1 store queued without a payload: built now and queued as
    /// notifications, in one transaction with their removal from the old table.
    static func requeueLegacyRevocations(store: some IngestStore, sealers: any SealerProvider, now: Int64, logger: Logger) async throws {
        var builder = NotificationBuilder(sealers: sealers)
        while true {
            let items = try await store.legacyRevocations(limit: 500)
            if items.isEmpty { return }
            var batch = CommitBatch(now: now)
            for item in items {
                let notice = Notice(
                    subscription: item.subscription,
                    event: Event(app: item.subscription.app, path: item.subscription.path.string, body: .revoke(item.reason)))
                let entry = try? OutboxEntry(notice, payload: builder.payload(notice).bytes, recordSeq: nil)
                batch.operations.append(.revoke(handle: item.subscription.handle ?? 0, notification: entry, condition: .alreadyRemoved))
                batch.legacyProcessed.append(item.sequence)
            }
            _ = try await store.commit(batch)
            logger.info("revocations of an earlier version requeued", metadata: ["count": "\(items.count)"])
        }
    }

    /// What `run` checks before it opens anything: every application prepared (keys, signing
    /// key, authentication, service-account files). Throws ``ConfigurationError``.
    public static func check(_ configuration: ServiceConfiguration) throws {
        _ = try applications(configuration)
    }

    /// The providers some application uses: `fcm`, `hms`, `webhook`.
    static func providers(_ configuration: ServiceConfiguration) -> [String] {
        var providers: Set<String> = []
        for app in configuration.apps.values {
            if app.fcm != nil { providers.insert("fcm") }
            if app.hms != nil { providers.insert("hms") }
            if !app.webhooks.isEmpty { providers.insert("webhook") }
        }
        return providers.sorted()
    }

    /// Checks and prepares every application (see ``PreparedApplication``).
    static func applications(_ configuration: ServiceConfiguration) throws -> [String: PreparedApplication] {
        try PreparedApplication.prepareAll(configuration, authentication: true)
    }

    static func keyRing(_ file: String, key: String) throws -> KeyRing {
        guard let handle = FileHandle(forReadingAtPath: file) else {
            throw ConfigurationError("\(key): cannot read the JWK Set \(file)")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: (1 << 20) + 1)) ?? Data()
        guard data.count <= 1 << 20 else {
            throw ConfigurationError("\(key): the JWK Set \(file) is larger than 1 MiB")
        }
        do {
            return try KeyRing(jwkSetText: [UInt8](data))
        } catch {
            throw ConfigurationError("\(key): \(file): \(error)")
        }
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

/// The dispatcher's paused senders, for readiness, metrics and status (empty until the
/// dispatcher exists, and when delivery is off).
final class PausedApplications: Sendable {
    let dispatcher = Mutex<Dispatcher?>(nil)

    var applications: [String] { dispatcher.withLock { $0 }?.pausedApplications ?? [] }
    var details: [SenderKey: Dispatcher.Pause] { dispatcher.withLock { $0 }?.paused ?? [:] }
}

/// Stops a running service gracefully, as SIGTERM does (the demo and tests use it).
public final class ServiceStopper: Sendable {
    let state = Mutex<(group: ServiceGroup?, stopped: Bool)>((nil, false))

    public init() {}

    func attach(_ group: ServiceGroup) {
        let stopped = state.withLock { state -> Bool in
            state.group = group
            return state.stopped
        }
        if stopped { Task { await group.triggerGracefulShutdown() } }
    }

    /// Asks the service to stop: ingest stops, what was taken is committed, the sends in flight
    /// finish, the store closes.
    public func stop() {
        let group = state.withLock { state -> ServiceGroup? in
            state.stopped = true
            return state.group
        }
        if let group { Task { await group.triggerGracefulShutdown() } }
    }
}

/// What the service runs on: every store protocol, and where it is (messages).
public protocol RuntimeStore: SubscriptionStore, ServiceKeyStore, IngestStore, DeliveryStore {
    /// The file or the database, without secrets.
    var location: String { get }
}

extension SQLiteStore: RuntimeStore {
    public var location: String { path }
}

extension PostgresStore: RuntimeStore {}
