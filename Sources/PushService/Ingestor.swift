import Logging
import PushCore
import PushIngest
import ServiceLifecycle

/// The heart of the service: lines from the sources go through the record pipeline in batches;
/// each batch's notifications, tree journal and source checkpoints commit in one transaction
/// (group commit), then socket clients get their answers. A crash loses nothing and duplicates
/// nothing: what was committed is resumed from, what was not is read again.
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

    func run() async throws {
        let (snapshots, snapshotRequests) = AsyncStream<(app: String, tree: DataTree, through: Int64)>.makeStream()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // Snapshots are serialised and written beside the processing, which goes on.
                for await request in snapshots {
                    await writeSnapshot(request.app, request.tree, through: request.through)
                }
            }
            defer { snapshotRequests.finish() }
            try await withGracefulShutdownHandler {
                var state = State(pipeline: initial, builder: NotificationBuilder(sealers: sealers), loaded: loaded)
                while true {
                    let lines = await queue.receive(limit: configuration.batchLines)
                    if lines.isEmpty { break }  // finished and drained
                    let requests = try await process(lines, &state)
                    for request in requests { snapshotRequests.yield(request) }
                }
            } onGracefulShutdown: {
                queue.finish()
            }
            snapshotRequests.finish()
            try await group.waitForAll()
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

    /// Processes and commits one batch; returns the snapshots now due.
    func process(_ lines: [IngestLine], _ state: inout State) async throws -> [(app: String, tree: DataTree, through: Int64)] {
        var batch = CommitBatch(now: now())
        var letters: [DeadLetter] = []
        var answers: [(IngestAck, AckResult)] = []
        var positions: [String: (position: Int64, identity: String?)] = [:]
        var accepted = 0
        for line in lines {
            positions[line.source] = (line.resumePosition, line.fileIdentity)
            let outcome: RecordPipeline.Outcome
            if let length = line.overflow {
                outcome = .rejected(RecordError("the line is \(length) bytes; a record is at most \(configuration.maxLineBytes) bytes"))
            } else {
                outcome = try await retrying("reading subscriptions") {
                    try await state.pipeline.process(line.bytes, source: line.source, lookup: registry, directory: registry)
                }
            }
            switch outcome {
            case .rejected(let error):
                letters.append(
                    DeadLetter(timestamp: batch.now, source: line.source, position: line.position, reason: error.reason, line: line.bytes))
                if let ack = line.ack { answers.append((ack, .rejected(seq: error.seq, reason: error.reason))) }
            case .accepted(let record, let changedTree, let notices):
                accepted += 1
                if changedTree {
                    batch.journal[record.app, default: []] += line.bytes
                    batch.journal[record.app]!.append(UInt8(ascii: "\n"))
                }
                for notice in notices {
                    let entry: OutboxEntry?
                    do {
                        entry = OutboxEntry(notice, payload: try state.builder.payload(notice).bytes, recordSeq: record.seq)
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
                if let ack = line.ack { answers.append((ack, .accepted(seq: record.seq))) }
            }
        }
        for (source, position) in positions.sorted(by: { $0.key < $1.key }) {
            batch.checkpoints.append(
                SourceCheckpoint(
                    source: source, lastSeq: state.pipeline.watermarks[source], position: position.position, fileIdentity: position.identity))
        }
        // Rejected lines are on disk before the checkpoint that skips them commits.
        try await retrying("writing the dead-letter file") { try deadLetters.append(letters) }
        if !letters.isEmpty {
            logger.warning("change records rejected; see the dead-letter file", metadata: ["count": "\(letters.count)", "file": "\(deadLetters.path)"])
        }
        let result = try await retrying("committing a batch") { try await store.commit(batch) }
        for (ack, answer) in answers { ack.complete(answer) }
        if !result.revoked.isEmpty { registry.nudge() }
        logger.debug(
            "batch committed",
            metadata: ["lines": "\(lines.count)", "accepted": "\(accepted)", "queued": "\(result.queued)", "coalesced": "\(result.coalesced)"])

        var due: [(app: String, tree: DataTree, through: Int64)] = []
        for (app, bytes) in batch.journal {
            state.journalBytes[app, default: 0] += bytes.count
            if state.journalBytes[app]! >= configuration.snapshotAfterBytes, let through = result.journalIDs[app] {
                due.append((app, state.pipeline.processor.trees[app] ?? DataTree(), through))
                state.journalBytes[app] = 0
            }
        }
        return due
    }

    func writeSnapshot(_ app: String, _ tree: DataTree, through: Int64) async {
        var writer = JSONWriter(capacity: 1 << 20)
        writer.write(tree.root ?? .null)
        let bytes = writer.bytes
        try? await retrying("writing a snapshot") { try await store.saveSnapshot(app: app, tree: bytes, through: through) }
        logger.info("tree snapshot written", metadata: ["app": "\(app)", "bytes": "\(bytes.count)", "throughJournal": "\(through)"])
    }

    /// Runs `body` until it succeeds, waiting longer after each failure (up to 5 s), logging
    /// each: the store may be busy or the disk full for a while; giving up would lose data.
    /// Stops with `CancellationError` when the task is cancelled (a hard stop: what is not
    /// committed is read again after the restart).
    func retrying<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        var delay = Duration.milliseconds(50)
        while true {
            do {
                return try await body()
            } catch {
                try Task.checkCancellation()
                logger.error("ingestion is held up; retrying", metadata: ["while": "\(what)", "error": "\(error)", "retryIn": "\(delay)"])
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
        }
    }
}
