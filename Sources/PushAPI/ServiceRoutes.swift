import Hummingbird

/// Every route the service serves, in one router: the subscription API with discovery and
/// health (``SubscriptionAPI``), `/metrics` and `/status` (``OperationsRoutes``), the operations
/// API under `/ops/v1` (``OperationsAPI``) and the console (``ConsoleRoutes``). The OpenAPI
/// document (`docs/openapi.yaml`, served at `/openapi.json`) describes each of them; a test
/// fails when a route here is not in it. On each of their paths, any other method answers 405
/// with `Allow` (``ServedPaths``).
public enum ServiceRoutes {
    public static func router(
        subscriptions: SubscriptionAPI, gate: OperationsRoutes, control: any OperationsControl, sessions: ConsoleSessions
    ) -> Router<BasicRequestContext> {
        let served = ServedPaths()
        let router = subscriptions.router(served: served)
        gate.add(to: router)
        OperationsAPI(control: control, gate: gate).add(to: router)
        ConsoleRoutes(gate: gate, sessions: sessions).add(to: router)
        served.record(router)
        return router
    }
}
