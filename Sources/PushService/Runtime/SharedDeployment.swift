import PushContracts
import PushCore
import PushEngine
import PushStore

/// One of several instances sharing a PostgreSQL store (docs/scaling-out.md): its sources feed
/// the shared inbox (``InboxIntake``); it holds a fair share of the applications' leases
/// (``LeaseKeeper``) and processes their records (``ApplicationOwner``); signals wake it
/// (``ClusterListener``) and the others (``SharedOutbox``).
struct SharedDeployment: Deployment {
    let shared: any SharedStore
    let instance: String
    /// What a queue file's checkpoint is filed under (``ServiceConfiguration/machineName``).
    let machine: String
    /// `http.host:http.port` until the server listens.
    let configuredAddress: String
    let releasesEveryClaimAtStart = false
    /// The others release this instance's claims once its heartbeat is older than
    /// ``SharedInstances/staleAfter``: a send starts only within that of the last heartbeat
    /// written, less a second.
    let claimTenure = ClaimTenure(staleAfter: SharedInstances.staleAfter, margin: 1_000)
    let instanceShare = InstanceShare()

    init(store: any SharedStore, instance: String, machine: String, configuredAddress: String) {
        self.shared = store
        self.instance = instance
        self.machine = machine
        self.configuredAddress = configuredAddress
    }

    var store: any RuntimeStore { shared }

    func checkpointKey(_ source: String) -> String { SharedInstances.sourceKey(source: source, machine: machine) }

    func treeView(clock: any ServiceClock) -> TreeView {
        TreeView(store: shared, clock: clock)
    }

    func processing(_ parts: ServiceParts) async throws -> Processing {
        try await SharedInstances.claimName(instance, store: shared)
        let registering = parts.clock.now
        try await shared.registerStart(instance: instance, address: parts.address.current)
        claimTenure.heartbeat(sentAt: registering)
        let wake = Wakeup()
        let outbox = SharedOutbox(store: shared, local: parts.delivery)
        let keeper = LeaseKeeper(
            store: shared, instance: instance, address: parts.address, applications: parts.applications.keys.sorted(), changed: wake,
            outbox: parts.delivery, tenure: claimTenure, share: instanceShare, clock: parts.clock, report: parts.report, logger: parts.logger)
        let engine = RecordEngine(
            settings: parts.settings, sealers: parts.sealers, registry: parts.registry, view: parts.view, configuration: parts.engineConfiguration,
            logger: parts.logger)
        let writer = BatchWriter(deadLetters: parts.deadLetters, counters: parts.counters, index: parts.registry, outbox: outbox, health: parts.health, traces: parts.traces, logger: parts.logger)
        let owner = ApplicationOwner(
            store: shared, leases: keeper, engine: engine, registry: parts.registry, writer: writer, wake: wake, clock: parts.clock,
            batchLines: parts.tuning.ingest.batchLines, logger: parts.logger)
        let listener = ClusterListener(store: shared, index: parts.registry, owner: wake, outbox: parts.delivery, resume: parts.resume)
        let checker = LineChecker(watermarks: parts.checkpoints.compactMapValues(\.lastSeq), maxLineBytes: parts.configuration.ingest.maxRecordBytes)
        let machine = self.machine
        let intake = InboxIntake(
            queue: parts.queue, store: shared, key: { SharedInstances.sourceKey(source: $0, machine: machine) }, checker: checker, writer: writer, clock: parts.clock,
            batchLines: parts.tuning.ingest.batchLines, logger: parts.logger)
        // The outbox signal starts before the owner and stops after it: the owner's last commits
        // still wake the other instances.
        return Processing(lifetime: [keeper], records: [outbox, owner, listener], intake: [intake], outbox: outbox, cluster: shared)
    }
}
