import PushAPI
import PushCore
import PushContracts
import PushJSON
import PushDelivery
import PushEngine
import PushStore

/// What operators read, gathered from the parts: the metrics, the status document
/// (``OperatorStatus``), and readiness (the store answering, the sources attached; a paused
/// sender or destination is reported, never a reason to take the instance out of service). PushAPI's
/// ``OperationsRoutes`` serves the first two.
struct Operations: ReadinessProbe, OperationsReport {
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
        observability.readiness()
    }

    func metrics() async -> [UInt8] {
        await observability.exposition(store: store, paused: Array(dispatcher.paused.keys))
    }

    func status() async -> JSON {
        await OperatorStatus.document(
            instance: instance, observability: observability, store: store, deliveries: deliveries, ingest: ingest,
            paused: dispatcher.paused, cluster: cluster)
    }
}
