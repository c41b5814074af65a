import Logging
import PushCore
import PushDelivery
import PushIngest
import ServiceLifecycle

/// The heart of the service: lines from the sources go through the record pipeline in batches;
/// each batch's notifications, tree journal and source checkpoints commit in one transaction
/// (group commit), then socket clients get their answers. A crash loses nothing and duplicates
/// nothing: what was committed is resumed from, what was not is read again.
///
/// Processing and committing overlap: while batch N commits (the store's writer: SQLite pages
/// and the fsync), batch N + 1 is processed (parse, trees, matching, payloads). Commits stay
/// one at a time and in order, and nothing of a batch is answered or snapshotted before it
/// committed, so a crash still loses nothing: batch N + 1 was neither committed nor
/// checkpointed, and it is read again.
struct Ingestor: Service {
    struct Configuration {
        /// Lines taken per batch at most (fewer when fewer wait: no batch waits to fill up).
        var batchLines = 2_000
        /// A snapshot of an application's tree is written once this many bytes of its records
        /// were journalled since the last one.
        var snapshotAfterBytes = 64 << 20
        var maxLineBytes = 16 << 20
    }

    let queue: IngestQueue
    let store: any IngestStore
    let registry: SubscriptionRegistry
    let sealers: any SealerProvider
    let deadLetters: DeadLetterFile
    let initial: RecordPipeline
    let loaded: TreeLoader.Loaded
    let configuration: Configuration
    /// Milliseconds since the epoch.
    let now: @Sendable () -> Int64
    let logger: Logger
    /// Called after a commit that queued notifications (the delivery worker looks for work).
    var didQueue: @Sendable () -> Void = {}
    /// What was ingested, rejected and built (metrics).
    var counters = IngestCounters(metrics: LabelledMetrics(factory: nil))

    typealias SnapshotRequest = (app: String, tree: DataTree, through: Int64)

    func run() async throws {
        let (snapshots, snapshotRequests) = AsyncStream<SnapshotRequest>.makeStream()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // Snapshots are serialised and written beside the processing, which goes on.
                for await request in snapshots {
                    await writeSnapshot(request.app, request.tree, through: request.through)
                }
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
    /// the next is processed.
    func consume(snapshots: AsyncStream<SnapshotRequest>.Continuation) async throws {
        try await withThrowingTaskGroup(of: Void.self) { commits in
            var state = State(pipeline: initial, builder: NotificationBuilder(sealers: sealers), loaded: loaded)
            var committing = false
            while true {
                let lines = await queue.receive(limit: configuration.batchLines)
                if lines.isEmpty { break }  // finished and drained
                let prepared = try await prepare(lines, &state)
                // One commit at a time, in order.
                if committing { try await commits.next() }
                commits.addTask {
                    for request in try await commit(prepared) { snapshots.yield(request) }
                }
                committing = true
            }
            try await commits.waitForAll()
        }
    }

    struct State {
        var pipeline: RecordPipeline
        var builder: NotificationBuilder
        var journalBytes: [String: Int]

        init(pipeline: RecordPipeline, builder: NotificationBuilder, loaded: TreeLoader.Loaded) {
            self.pipeline = pipeline
            self.builder = builder
            self.journalBytes = loaded.journalBytes
        }
    }

    /// A batch processed, to commit.
    struct Prepared: Sendable {
        var batch: CommitBatch
        var letters: [DeadLetter]
        var answers: [(IngestAck, AckResult)]
        var lines: Int
        var accepted: Int
        var counts: IngestCounters.Batch
        /// Trees to snapshot once the batch committed (the trees as of this batch).
        var snapshots: [(app: String, tree: DataTree)]
    }

    /// Processes one batch: the lines through the pipeline (the trees and the index move on),
    /// the notifications built. Nothing is written.
    func prepare(_ lines: [IngestLine], _ state: inout State) async throws -> Prepared {
        var batch = CommitBatch(now: now())
        var letters: [DeadLetter] = []
        var answers: [(IngestAck, AckResult)] = []
        var positions: [String: (position: Int64, identity: String?)] = [:]
        var accepted = 0
        var counts = IngestCounters.Batch()
        // The lines are applied in order; the notices of the batch's writes are resolved
        // against the stored subscriptions in one read of the directory, then built.
        var staged: [(record: ChangeRecord, notices: RecordPipeline.PendingNotices)] = []
        for line in lines {
            positions[line.source] = (line.resumePosition, line.fileIdentity)
            let outcome: RecordPipeline.Staged
            if let length = line.overflow {
                outcome = .rejected(RecordError("the line is \(length) bytes; a record is at most \(configuration.maxLineBytes) bytes"))
            } else {
                outcome = try await retrying("reading subscriptions") {
                    try await state.pipeline.stage(line.bytes, source: line.source, lookup: registry, directory: registry)
                }
            }
            switch outcome {
            case .rejected(let error):
                counts.rejected[IngestCounters.reasonLabel(error.reason), default: 0] += 1
                letters.append(
                    DeadLetter(timestamp: batch.now, source: line.source, position: line.position, reason: error.reason, line: line.bytes))
                if let ack = line.ack { answers.append((ack, .rejected(seq: error.seq, reason: error.reason))) }
            case .accepted(let record, let changedTree, let notices):
                accepted += 1
                counts.ingested[line.source, default: 0] += 1
                if changedTree {
                    batch.journal[record.app, default: []] += line.bytes
                    batch.journal[record.app]!.append(UInt8(ascii: "\n"))
                }
                if !notices.events.isEmpty || !notices.resolved.isEmpty { staged.append((record, notices)) }
                if let ack = line.ack { answers.append((ack, .accepted(seq: record.seq))) }
            }
        }
        let handles = staged.flatMap(\.notices.handles)
        let stored = handles.isEmpty ? [:] : try await retrying("reading subscriptions") { try await registry.subscriptions(handles: handles) }
        for (record, pending) in staged {
            for notice in pending.resolve(stored) {
                let entry: OutboxEntry?
                do {
                    let built = try state.builder.payload(notice)
                    entry = OutboxEntry(notice, payload: built.bytes, recordSeq: record.seq)
                    if case .revoke(let reason) = notice.event.body {
                        counts.revocations[reason.rawValue, default: 0] += 1
                    } else {
                        counts.event(mode: notice.subscription.mode, status: built.status)
                    }
                } catch {
                    logger.error(
                        "a notification cannot be built; it is not sent",
                        metadata: ["subscription": "\(notice.subscription.id)", "seq": "\(record.seq)", "error": "\(error)"])
                    entry = nil
                }
                let handle = notice.subscription.handle ?? 0
                if notice.revokes {
                    batch.operations.append(.revoke(handle: handle, notification: entry, condition: .exists))
                } else if let entry {
                    batch.operations.append(.notify(entry))
                }
            }
        }
        for (source, position) in positions.sorted(by: { $0.key < $1.key }) {
            batch.checkpoints.append(
                SourceCheckpoint(
                    source: source, lastSeq: state.pipeline.watermarks[source], position: position.position, fileIdentity: position.identity))
        }
        var snapshots: [(app: String, tree: DataTree)] = []
        for (app, bytes) in batch.journal {
            state.journalBytes[app, default: 0] += bytes.count
            if state.journalBytes[app]! >= configuration.snapshotAfterBytes {
                snapshots.append((app, state.pipeline.processor.trees[app] ?? DataTree()))
                state.journalBytes[app] = 0
            }
        }
        return Prepared(
            batch: batch, letters: letters, answers: answers, lines: lines.count, accepted: accepted, counts: counts, snapshots: snapshots)
    }

    /// Commits a prepared batch, then answers its socket clients; returns the snapshots now due.
    func commit(_ prepared: Prepared) async throws -> [SnapshotRequest] {
        // Rejected lines are on disk before the checkpoint that skips them commits.
        try await retrying("writing the dead-letter file") { try deadLetters.append(prepared.letters) }
        if !prepared.letters.isEmpty {
            logger.warning(
                "change records rejected; see the dead-letter file", metadata: ["count": "\(prepared.letters.count)", "file": "\(deadLetters.path)"])
        }
        let result = try await retrying("committing a batch") { try await store.commit(prepared.batch) }
        counters.committed(prepared.counts)
        for (ack, answer) in prepared.answers { ack.complete(answer) }
        if !result.revoked.isEmpty { registry.nudge() }
        if result.queued > 0 || result.coalesced > 0 { didQueue() }
        logger.debug(
            "batch committed",
            metadata: [
                "lines": "\(prepared.lines)", "accepted": "\(prepared.accepted)", "queued": "\(result.queued)", "coalesced": "\(result.coalesced)",
            ])
        return prepared.snapshots.compactMap { snapshot in
            result.journalIDs[snapshot.app].map { (snapshot.app, snapshot.tree, $0) }
        }
    }

    /// Processes and commits one batch (no overlap); returns the snapshots now due.
    func process(_ lines: [IngestLine], _ state: inout State) async throws -> [SnapshotRequest] {
        try await commit(try await prepare(lines, &state))
    }

    func writeSnapshot(_ app: String, _ tree: DataTree, through: Int64) async {
        var writer = JSONWriter(capacity: 1 << 20)
        writer.write(tree.root ?? .null)
        let bytes = writer.bytes
        try? await retrying("writing a snapshot") { try await store.saveSnapshot(app: app, tree: bytes, through: through) }
        logger.info("tree snapshot written", metadata: ["app": "\(app)", "bytes": "\(bytes.count)", "throughJournal": "\(through)"])
    }

    /// Runs `body` as ``retryingIngestion(_:logger:_:)`` does.
    func retrying<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        try await retryingIngestion(what, logger: logger, body)
    }
}

/// Runs `body` until it succeeds, waiting longer after each failure (up to 5 s), logging each:
/// the store may be busy or the disk full for a while; giving up would lose data. Stops with
/// `CancellationError` when the task is cancelled (a hard stop: what is not committed is read
/// again after the restart), and passes a lost lease on at once: another instance owns the
/// application now, and retrying cannot help.
func retryingIngestion<T>(_ what: String, logger: Logger, _ body: () async throws -> T) async throws -> T {
    var delay = Duration.milliseconds(50)
    while true {
        do {
            return try await body()
        } catch let error as StoreError where { if case .leaseLost = error.code { true } else { false } }() {
            throw error
        } catch {
            try Task.checkCancellation()
            logger.error("ingestion is held up; retrying", metadata: ["while": "\(what)", "error": "\(error)", "retryIn": "\(delay)"])
            try await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(5))
        }
    }
}
