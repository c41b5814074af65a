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

    func problem() async -> JSON? {
        observability.readiness(paused: dispatcher.pausedApplications)
    }

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.get("metrics") { _, _ in
            let text = await observability.exposition(store: store, paused: dispatcher.pausedApplications)
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: text)))
        }
        router.get("status") { _, _ in
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
}
