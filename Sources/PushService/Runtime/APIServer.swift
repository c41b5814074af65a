import Hummingbird
import Logging
import PushAPI
import PushContracts
import PushCore
import PushEngine
import PushJSON
import PushMatching
import PushStore

/// The HTTP server: every route of ``ServiceRoutes`` (the subscription REST API, discovery,
/// health and readiness, the operator's `/metrics`, `/status`, `/ops/v1` and console).
struct APIServer {
    let configuration: ServiceConfiguration
    let applications: [String: APIApplication]
    let store: any RuntimeStore
    let index: any SubscriptionIndexFollower
    let clock: any ServiceClock
    let jwks: JSON
    let operations: Operations
    /// What the operations API under `/ops/v1` acts on.
    let console: OperationsConsole
    /// `http.operationsToken`: required of `/metrics` and `/status` when set.
    let operationsToken: Secret?
    /// Learns the port listened on (shared instances publish it).
    let address: AdvertisedAddress
    let limits: ConnectionLimits
    let onListening: @Sendable (Int) async -> Void
    let logger: Logger

    func application() -> some ApplicationProtocol {
        let api = SubscriptionAPI(
            store: store, applications: applications, clock: clock, index: index, jwks: jwks, readiness: operations, logger: logger)
        let sessions = ConsoleSessions(clock: clock)
        let gate = OperationsRoutes(
            report: operations, token: operationsToken?.value, host: configuration.http.host, loopback: configuration.http.isLoopback,
            sessions: sessions)
        let router = ServiceRoutes.router(subscriptions: api, gate: gate, control: console, sessions: sessions)
        let (logger, address, http, onListening) = (self.logger, self.address, configuration.http, self.onListening)
        return Application(
            router: router,
            server: SubscriptionAPI.server(limits: limits, connections: operations.observability.apiConnections(maximum: limits.maxConnections)),
            configuration: .init(address: .hostname(http.host, port: http.port), serverName: "pushdispatch"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                address.listening(at: http.advertised(port: port))
                logger.info("listening", metadata: ["host": "\(channel.localAddress?.ipAddress ?? "?")", "port": "\(port)"])
                await onListening(port)
                // Once start-up is over, its code pages go (CodePages): idle, the resident set
                // is what the running service uses.
                Task.detached {
                    try? await Task.sleep(for: .seconds(5))
                    let dropped = CodePages.trim()
                    logger.debug("start-up code pages let go", metadata: ["bytes": "\(dropped)"])
                }
            },
            logger: logger)
    }
}
