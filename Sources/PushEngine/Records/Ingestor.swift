import Logging
import PushCore
import PushContracts
import ServiceLifecycle

/// A single instance's record processing: lines from the sources are checked
/// (``LineChecker``), run through the ``RecordEngine`` in batches, and each batch's
/// notifications, tree journal and source checkpoints commit in one transaction (group
/// commit, ``BatchWriter``), then socket clients get their answers. A crash loses nothing and
/// duplicates nothing: what was committed is resumed from, what was not is read again.
///
/// Processing and committing overlap: while batch N commits (the store's writer: SQLite pages
/// and the fsync), batch N + 1 is processed (parse, trees, matching, payloads). Commits stay
/// one at a time and in order, and nothing of a batch is answered or snapshotted before it
/// committed, so a crash still loses nothing: batch N + 1 was neither committed nor
/// checkpointed, and it is read again.
public struct Ingestor: Service {
    public struct Configuration: Sendable {
        /// Lines taken per batch at most (fewer when fewer wait: no batch waits to fill up).
        /// Only a backlog fills a batch; then a larger one touches each page of the outbox
        /// fewer times per record (a coalesced notification is updated in place, on a page
        /// that other records of the batch often share): 8,000 took ingestion on one core from
        /// ~32,000 to ~36,000 records/s (docs/benchmarks.md), for acknowledgements that wait
        /// for a larger commit while a backlog lasts.
        public var batchLines = 8_000

        public init(batchLines: Int = 8_000) {
            self.batchLines = batchLines
        }
    }

    let queue: IngestQueue
    let store: any IngestStore & SubscriptionStore
    let checker: LineChecker
    /// The name each source's watermark and checkpoint is kept under.
    let checkpointKey: @Sendable (String) -> String
    let engine: RecordEngine
    let writer: BatchWriter
    let clock: any ServiceClock
    let configuration: Configuration
    let logger: Logger

    /// - Parameters:
    ///   - checker: the sources' watermarks as checkpointed.
    ///   - checkpointKey: the name a source's checkpoint is filed under (default: its own).
    ///   - engine: the trees as loaded.
    public init(
        queue: IngestQueue, store: any IngestStore & SubscriptionStore, checker: LineChecker, checkpointKey: @escaping @Sendable (String) -> String = { $0 },
        engine: RecordEngine, writer: BatchWriter, clock: any ServiceClock, configuration: Configuration = Configuration(), logger: Logger
    ) {
        self.queue = queue
        self.store = store
        self.checker = checker
        self.checkpointKey = checkpointKey
        self.engine = engine
        self.writer = writer
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
    }

    public func run() async throws {
        let (snapshots, snapshotRequests) = AsyncStream<SnapshotRequest>.makeStream()
        let snapshotWriter = SnapshotWriter(store: store, logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // Snapshots are serialised and written beside the processing, which goes on.
                for await request in snapshots { await snapshotWriter.write(request) }
            }
            defer { snapshotRequests.finish() }
            try await withGracefulShutdownHandler {
                try await consume(snapshots: snapshotRequests)
            } onGracefulShutdown: {
                queue.finish()
            }
            snapshotRequests.finish()
            try await group.waitForAll()
        }
    }

    /// Takes batches from the queue until it is finished and drained, committing each while
    /// the next is processed. First, the subscriptions of applications with read rules are
    /// audited against the trees as loaded (SPEC §12.5).
    func consume(snapshots: AsyncStream<SnapshotRequest>.Continuation) async throws {
        var engine = self.engine
        for app in engine.auditedApplications {
            try await engine.audit(app: app, store: store, now: clock.now) { prepared in
                _ = try await writer.commit(prepared, { try await store.commit($0) })
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { commits in
            var checker = self.checker
            // What the batch committing now does to the index: applied once it committed, seen
            // by the next batch's records meanwhile.
            var committing: IndexEffects?
            while true {
                let lines = await queue.receive(limit: configuration.batchLines)
                // Empty: the end, or a wake-up for subscriptions to admit.
                if lines.isEmpty && (queue.isDone || Task.isCancelled) { break }
                let now = clock.now
                let prepared = try await engine.prepare(
                    checker.check(lines, now: now, key: checkpointKey), now: now, admitting: engine.registry.takeAdmissions(),
                    committing: committing ?? IndexEffects())
                if lines.isEmpty && prepared.batch.isEmpty && prepared.effects.isEmpty { continue }
                // One commit at a time, in order.
                if committing != nil { try await commits.next() }
                commits.addTask {
                    for request in try await writer.commit(prepared, { try await store.commit($0) }) { snapshots.yield(request) }
                }
                committing = prepared.effects
            }
            try await commits.waitForAll()
        }
    }
}
