import Foundation
import Hummingbird
import Logging
import PushAPI
import PushCore
import PushJOSE
import PushStore
import ServiceLifecycle

/// The composition root: configuration → store, index, API, sweeper → one `ServiceGroup`.
public struct ServiceRuntime: Sendable {
    public let configuration: ServiceConfiguration
    public let logger: Logger
    /// Unix seconds now (tests move it).
    public let clock: @Sendable () -> Int64
    /// How often changes made by others are applied to the index.
    public let followInterval: Duration
    /// Deadlines and sizes of client connections to the REST API.
    public let connectionLimits: ConnectionLimits
    /// What timers sleep on (the expiry sweeper's interval); tests pass a manual clock.
    public let timerClock: any Clock<Duration>

    public init(
        configuration: ServiceConfiguration, logger: Logger,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }, followInterval: Duration = .seconds(1),
        connectionLimits: ConnectionLimits = .standard, timerClock: any Clock<Duration> = ContinuousClock()
    ) {
        self.timerClock = timerClock
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        self.followInterval = followInterval
        self.connectionLimits = connectionLimits
    }

    /// Opens the configured store.
    public static func openStore(_ configuration: ServiceConfiguration) throws -> SQLiteStore {
        switch configuration.store {
        case .sqlite(let path):
            return try SQLiteStore(path: path)
        case .postgres:
            throw ConfigurationError("store.postgres: PostgreSQL is not supported by this version yet; use store.sqlite")
        }
    }

    /// Runs until SIGTERM or SIGINT (or until the task is cancelled). `onListening` receives the
    /// HTTP port once the server accepts connections.
    public func run(onListening: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let store = try Self.openStore(configuration)
        let serviceKeys = try await ServiceKey.loadOrCreate(in: store)
        let applications = try Self.applications(configuration)
        let registry = SubscriptionRegistry(store: store, logger: logger)
        try await registry.load()
        logger.info(
            "subscriptions loaded", metadata: ["count": "\(registry.count)", "store": "\(store.path)"])

        let jwks = Self.publishedKeys(serviceKeys: serviceKeys, applications: applications)
        let api = SubscriptionAPI(
            store: store, applications: applications.mapValues(\.api), clock: clock,
            didChange: { registry.nudge() }, jwks: { jwks }, logger: logger)
        let logger = self.logger
        let server = Application(
            router: api.router(),
            server: SubscriptionAPI.server(limits: connectionLimits),
            configuration: .init(address: .hostname(configuration.http.host, port: configuration.http.port), serverName: "pushdispatch"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.info("listening", metadata: ["host": "\(channel.localAddress?.ipAddress ?? "?")", "port": "\(port)"])
                await onListening(port)
            },
            logger: logger)
        let sweeper = ExpirySweeper(
            store: store, registry: registry, interval: configuration.expiry.interval, now: clock, clock: timerClock, logger: logger)
        let follower = ChangeFollower(store: store, registry: registry, interval: followInterval, logger: logger)
        let syncer = IndexSyncer(registry: registry, logger: logger)
        let group = ServiceGroup(
            configuration: .init(
                services: [
                    .init(service: server), .init(service: sweeper), .init(service: follower), .init(service: syncer),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
        logger.info("stopped")
    }

    /// Checks and prepares every application (see ``PreparedApplication``).
    static func applications(_ configuration: ServiceConfiguration) throws -> [String: PreparedApplication] {
        try PreparedApplication.prepareAll(configuration, authentication: true)
    }

    static func keyRing(_ file: String, key: String) throws -> KeyRing {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ConfigurationError("\(key): cannot read the JWK Set \(file)")
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
