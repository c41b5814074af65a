import Logging
import PushContracts
import PushCore
import PushMatching
import PushTracing

/// Commits prepared batches, in the order durability needs: the refused lines on disk first (a
/// refused line is never lost), then the batch in one transaction, then what its records did
/// to the in-memory index (only once committed: a batch that fails leaves the index as it
/// was), the socket answers (an acknowledged record is durable), the counters, and the
/// wake-ups (the delivery worker, the index after revocations).
public struct BatchWriter: Sendable {
    let deadLetters: any DeadLetterSink
    let counters: IngestCounters
    /// The in-memory index: a committed batch's ``PreparedBatch/effects`` are applied to it.
    let index: any SubscriptionIndexFollower & SubscriptionLookup
    let outbox: any OutboxListener
    /// Told while a write is held up (readiness).
    let health: StoreHealth
    /// A span per record, when tracing is on.
    let traces: Traces?
    let logger: Logger

    public init(
        deadLetters: any DeadLetterSink, counters: IngestCounters, index: any SubscriptionIndexFollower & SubscriptionLookup,
        outbox: any OutboxListener, health: StoreHealth = StoreHealth(), traces: Traces? = nil, logger: Logger
    ) {
        self.deadLetters = deadLetters
        self.counters = counters
        self.index = index
        self.outbox = outbox
        self.health = health
        self.traces = traces
        self.logger = logger
    }

    /// Commits `prepared` through `commit` (the store's plain commit, or a fenced one); returns
    /// the snapshots now due, each with the journal row it covers.
    public func commit(_ prepared: PreparedBatch, _ commit: (CommitBatch) async throws -> CommitResult) async throws -> [SnapshotRequest] {
        try await writeLetters(prepared.intake.letters)
        // Each record's span starts before the commit (its context is known to its deliveries
        // before they can be claimed) and ends once it committed.
        let spans = traces.map { traces in
            prepared.intake.accepted.map { line, record in
                traces.startRecord(app: record.app, seq: record.seq, source: line.source, traceparent: record.traceparent, at: prepared.batch.now)
            }
        }
        var committed = false
        defer { if let traces, let spans { Self.end(spans, of: prepared.batch, committed: committed, traces) } }
        let result = try await retryingIngestion("committing a batch", health: health, logger: logger) { try await commit(prepared.batch) }
        committed = true
        index.apply(prepared.effects)
        counters.committed(prepared.intake.counts)
        for (ack, answer) in prepared.intake.answers { ack.complete(answer) }
        if !result.revoked.isEmpty { index.nudge() }
        if result.queued > 0 || result.coalesced > 0 { outbox.outboxChanged() }
        logger.debug(
            "batch committed",
            metadata: [
                "lines": "\(prepared.intake.accepted.count + prepared.intake.letters.count)", "accepted": "\(prepared.intake.accepted.count)",
                "queued": "\(result.queued)", "coalesced": "\(result.coalesced)",
            ])
        return prepared.snapshots.compactMap { snapshot in
            result.journalIDs[snapshot.app].map { SnapshotRequest(app: snapshot.app, tree: snapshot.tree, through: $0) }
        }
    }

    /// Ends the records' spans, each with the number of notifications it queued.
    static func end(_ spans: [Traces.RecordSpan], of batch: CommitBatch, committed: Bool, _ traces: Traces) {
        var queued: [String: [Int64: Int]] = [:]
        for operation in batch.operations {
            let entry: OutboxEntry?
            switch operation {
            case .notify(let notification): entry = notification
            case .revoke(_, let notification, _): entry = notification
            }
            if let entry, let seq = entry.recordSeq { queued[entry.app, default: [:]][seq, default: 0] += 1 }
        }
        for span in spans { traces.endRecord(span, notifications: queued[span.app]?[span.seq] ?? 0, committed: committed) }
    }

    /// Makes checked lines durable some other way than by a commit of their effects (the
    /// shared inbox, through `store`): the refused lines on disk first, then `store` (retried
    /// while it fails), then the answers and the counts.
    /// Like ``accept(_:_:_:)``, for a store that may find accepted records accepted already
    /// (a source shared by instances): `store` returns them, and they are answered as the checks
    /// answer a `seq` at or below the watermark (a socket line: a duplicate; another: refused).
    public func accept(
        _ checked: CheckedLines, _ what: String, now: Int64, _ store: () async throws -> [AcceptedAlready]
    ) async throws {
        try await writeLetters(checked.letters)
        let duplicates = try await retryingIngestion(what, health: health, logger: logger, store)
        var checked = checked
        if !duplicates.isEmpty { try await writeLetters(checked.acceptedElsewhere(duplicates, now: now)) }
        counters.committed(checked.counts)
        for (ack, answer) in checked.answers { ack.complete(answer) }
    }

    public func accept(_ checked: CheckedLines, _ what: String, _ store: () async throws -> Void) async throws {
        try await writeLetters(checked.letters)
        try await retryingIngestion(what, health: health, logger: logger, store)
        counters.committed(checked.counts)
        for (ack, answer) in checked.answers { ack.complete(answer) }
    }

    /// Writes refused lines to the dead-letter file, durably (retrying while it fails).
    public func writeLetters(_ letters: [DeadLetter]) async throws {
        guard !letters.isEmpty else { return }
        try await retryingIngestion("writing the dead-letter file", health: health, logger: logger) { try deadLetters.append(letters) }
        logger.warning("change records rejected; see the dead-letter file", metadata: ["count": "\(letters.count)", "file": "\(deadLetters.location)"])
    }
}
