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

    /// An application ready for the API, with its key ring.
    struct PreparedApplication {
        let api: APIApplication
        let keys: KeyRing
        let signingKey: JWK?
    }

    /// Checks and prepares every application: its key files are read, its signing key found.
    static func applications(_ configuration: ServiceConfiguration) throws -> [String: PreparedApplication] {
        var prepared: [String: PreparedApplication] = [:]
        var verifiers: [(app: String, verifier: BearerTokenVerifier)] = []
        for (id, app) in configuration.apps {
            let path = "apps.\(id)"
            var keys = try KeyRing([])
            if let file = app.keys {
                keys = try keyRing(file, key: "\(path).keys")
            }
            var signingKey: JWK?
            if let kid = app.signingKey {
                guard let key = keys.key(kid: kid, use: .signature) else {
                    throw ConfigurationError("\(path).signingKey: no key \(quotedString(kid)) in \(path).keys")
                }
                do {
                    _ = try JWSSigner(key: key)
                } catch {
                    throw ConfigurationError("\(path).signingKey: \(error)")
                }
                signingKey = key
            }
            var verifier: BearerTokenVerifier?
            if let auth = app.auth {
                let leeway = auth.leeway.components.seconds
                if let secret = auth.hs256Secret {
                    do {
                        verifier = try .hs256(secret: secret.value, issuer: auth.issuer, audience: auth.audience, leeway: leeway)
                    } catch {
                        throw ConfigurationError("\(path).auth.hs256Secret: \(error)")
                    }
                } else if let file = auth.jwks {
                    verifier = BearerTokenVerifier(
                        keys: try keyRing(file, key: "\(path).auth.jwks"), issuer: auth.issuer, audience: auth.audience, leeway: leeway)
                }
            }
            if let verifier { verifiers.append((id, verifier)) }
            let factory = EventSealerFactory(keys: keys)
            let rules = SubscriptionRules(
                webhooks: Set(app.webhooks.keys), lifetimes: app.subscriptions.lifetimes,
                checkEncryption: { spec throws(RequestError) in try factory.checkEncryption(spec) })
            prepared[id] = PreparedApplication(
                api: APIApplication(id: id, verifier: verifier, rules: rules), keys: keys, signingKey: signingKey)
        }
        try checkTokenIsolation(verifiers.sorted { $0.app < $1.app })
        return prepared
    }

    /// A token issued for one application must never act on another (SPEC §11.10). Two
    /// applications whose bearer tokens verify with a common key would accept each other's
    /// tokens unless the claims tell them apart: both must then require distinct audiences
    /// (`aud`) or distinct issuers (`iss`). Such a configuration is refused at start.
    static func checkTokenIsolation(_ verifiers: [(app: String, verifier: BearerTokenVerifier)]) throws {
        func thumbprints(_ verifier: BearerTokenVerifier) -> Set<String> {
            Set(verifier.keys.keys.filter { $0.use != KeyUse.encryption.rawValue }.map(\.thumbprint))
        }
        func distinct(_ a: String?, _ b: String?) -> Bool {
            if let a, let b { return a != b }
            return false
        }
        let prints = verifiers.map { thumbprints($0.verifier) }
        for i in verifiers.indices {
            for j in verifiers.indices where j > i {
                let (a, b) = (verifiers[i], verifiers[j])
                guard !prints[i].isDisjoint(with: prints[j]) else { continue }
                if distinct(a.verifier.audience, b.verifier.audience) || distinct(a.verifier.issuer, b.verifier.issuer) { continue }
                throw ConfigurationError(
                    "apps.\(a.app).auth and apps.\(b.app).auth verify bearer tokens with the same key, so a token issued for one "
                        + "application would act on the other; give each application its own hs256Secret or jwks key, or set a "
                        + "different audience (apps.\(a.app).auth.audience, apps.\(b.app).auth.audience) or issuer on both")
            }
        }
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
