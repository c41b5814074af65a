import Logging
import PushCore
import PushContracts
import PushEngine
import PushTracing
import ServiceLifecycle

/// What the root builds the same for every deployment, and the processing services need.
struct ServiceParts: Sendable {
    let configuration: ServiceConfiguration
    let applications: [String: PreparedApplication]
    let registry: SubscriptionRegistry
    let sealers: any SealerProvider
    let queue: IngestQueue
    /// The sources' checkpoints as stored (by this deployment's checkpoint key).
    let checkpoints: [String: SourceCheckpoint]
    let deadLetters: any DeadLetterSink
    let counters: IngestCounters
    /// Told while ingestion's writes are held up (readiness).
    let health: StoreHealth
    /// The local delivery worker.
    let delivery: any OutboxListener
    /// Where the HTTP API can be reached (published by shared instances).
    let address: AdvertisedAddress
    /// Where the engine publishes its trees for the REST API's rule checks (`nil`: no rule
    /// reads data).
    let view: TreeView?
    let clock: any ServiceClock
    /// This instance's report for the others' operations overview (``InstanceReport``).
    let report: @Sendable () -> [UInt8]?
    /// Resumes a sender here (an operator resumed it on another instance).
    let resume: @Sendable (SenderKey) -> Void
    let tuning: ServiceRuntime.Tuning
    /// The spans of records and attempts, when tracing is on.
    let traces: Traces?
    let logger: Logger

    /// The configured applications' settings, read rules included.
    var settings: [String: PipelineSettings] { applications.mapValues(\.settings) }

    var engineConfiguration: RecordEngine.Configuration {
        RecordEngine.Configuration(
            snapshotAfterBytes: tuning.snapshotAfterBytes ?? configuration.ingest.snapshotAfter, keepsHistory: configuration.operations.history.isOn)
    }
}

/// The services a deployment runs to process records, by when they start and stop.
struct Processing: Sendable {
    /// Started first, stopped last (a lease keeper's heartbeat keeps the claims of the last
    /// sends alive until they are answered).
    var lifetime: [any Service] = []
    /// What processes records: started after the delivery worker, stopped before it.
    var records: [any Service]
    /// What takes the sources' lines: started after the processing, stopped before it.
    var intake: [any Service] = []
    /// Told when notifications were queued here (the sweeper).
    var outbox: any OutboxListener
    /// The instances sharing the store, for `/status`; `nil` for a single instance.
    var cluster: (any ClusterStore)?
}
