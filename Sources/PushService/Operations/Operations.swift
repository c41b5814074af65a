import Hummingbird
import PushAPI
import PushCore
import PushDelivery
import PushEngine
import PushStore

/// What operators read: `/metrics` (Prometheus text), `/status` (``OperatorStatus``), and
/// readiness (sources attached, no application paused).
struct Operations: ReadinessProbe {
    /// This process's name (`/status`).
    let instance: String
    let observability: Observability
    let store: any RuntimeStore
    let dispatcher: Dispatcher
    let deliveries: DeliveryCounters
    let ingest: IngestCounters
    /// The instances sharing the store; `nil` for a single instance.
    let cluster: (any ClusterStore)?
    /// `http.operationsToken`: required of `/metrics` and `/status` when set.
    let token: Secret?

    func problem() async -> JSON? {
        observability.readiness(paused: dispatcher.pausedApplications)
    }

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.get("metrics") { request, _ in
            if let refusal = refusal(request) { return refusal }
            let text = await observability.exposition(store: store, paused: dispatcher.pausedApplications)
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: text)))
        }
        router.get("status") { request, _ in
            if let refusal = refusal(request) { return refusal }
            let document = await OperatorStatus.document(
                instance: instance, observability: observability, store: store, deliveries: deliveries, ingest: ingest,
                paused: dispatcher.paused, cluster: cluster)
            var writer = JSONWriter(capacity: 2048)
            writer.write(document)
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: writer.bytes)))
        }
    }

    /// A 401 unless the request carries the operations token (when one is configured). The
    /// comparison takes the same time wherever the tokens differ.
    func refusal(_ request: Request) -> Response? {
        guard let token else { return nil }
        let given = request.headers[.authorization].flatMap { value -> Substring? in
            guard value.count > 7, value.prefix(7).lowercased() == "bearer " else { return nil }
            return value.dropFirst(7)
        }
        if let given, Self.same(Array(given.utf8), Array(token.value.utf8)) { return nil }
        let message =
            given == nil
            ? "this endpoint needs the operations token: Authorization: Bearer <http.operationsToken>"
            : "the operations token is not the one configured (http.operationsToken)"
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.wwwAuthenticate] = given == nil ? "Bearer realm=\"pushdispatch-operations\"" : "Bearer realm=\"pushdispatch-operations\", error=\"invalid_token\""
        var writer = JSONWriter(capacity: 256)
        writer.write(["error": "unauthorized", "message": .string(message)] as JSON)
        return Response(status: .unauthorized, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: writer.bytes)))
    }

    /// Equal bytes, compared in a time that depends on the lengths only.
    static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        for index in 0..<max(a.count, b.count) {
            difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0)
        }
        return difference == 0 && a.count == b.count
    }
}
