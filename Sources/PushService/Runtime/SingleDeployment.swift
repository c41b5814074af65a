import Foundation
import PushContracts
import PushCore
import PushEngine
import PushStore

/// This process alone on its store (SQLite, or PostgreSQL held alone): it loads every tree at
/// start and processes every record itself (``Ingestor``).
struct SingleDeployment: Deployment {
    let store: any RuntimeStore
    let instance: String
    /// On PostgreSQL, checkpoints are filed under the instance's name, as shared instances file
    /// theirs: a database moves between the modes without reading its sources again.
    let filesCheckpointsUnderName: Bool
    /// PostgreSQL: what a queue file's checkpoint is filed under.
    let machine: String
    let releasesEveryClaimAtStart = true
    let claimTenure = ClaimTenure()
    let instanceShare = InstanceShare()
    /// SQLite: the lock on the database file that keeps a second `run` off it.
    let lock: ProcessLock?

    /// SQLite: checkpoints under the sources' names, claims under host and process (a restart
    /// after a crash releases every claim anyway).
    init(sqlite store: SQLiteStore, lock: ProcessLock) {
        self.store = store
        self.lock = lock
        self.machine = ""
        self.instance = "\(ProcessInfo.processInfo.hostName)-\(ProcessInfo.processInfo.processIdentifier)"
        self.filesCheckpointsUnderName = false
    }

    /// PostgreSQL held alone: checkpoints filed as shared instances file theirs, claims under
    /// `instance.name`.
    init(postgres store: PostgresStore, instance: String, machine: String) {
        self.store = store
        self.machine = machine
        self.lock = nil
        self.instance = instance
        self.filesCheckpointsUnderName = true
    }

    func checkpointKey(_ source: String) -> String {
        filesCheckpointsUnderName ? SharedInstances.sourceKey(source: source, machine: machine) : source
    }

    func treeView(clock: any ServiceClock) -> TreeView {
        TreeView(store: nil, clock: clock)
    }

    func processing(_ parts: ServiceParts) async throws -> Processing {
        let trees = try await TreeLoader.load(from: store, logger: parts.logger)
        let checker = LineChecker(watermarks: parts.checkpoints.compactMapValues(\.lastSeq), maxLineBytes: parts.configuration.ingest.maxRecordBytes)
        let key = checkpointKey
        let engine = RecordEngine(
            trees: trees, settings: parts.settings, sealers: parts.sealers, registry: parts.registry, view: parts.view,
            configuration: parts.engineConfiguration, logger: parts.logger)
        let writer = BatchWriter(deadLetters: parts.deadLetters, counters: parts.counters, index: parts.registry, outbox: parts.delivery, health: parts.health, traces: parts.traces, logger: parts.logger)
        let ingestor = Ingestor(
            queue: parts.queue, store: store, checker: checker, checkpointKey: key, engine: engine, writer: writer, clock: parts.clock,
            configuration: parts.tuning.ingest, logger: parts.logger)
        return Processing(records: [ingestor], outbox: parts.delivery, cluster: nil)
    }
}
