import Logging
import PushContracts
import PushCore
import PushMatching

/// The record engine: checked change records in, one commit's worth of effects out. Each
/// record goes through the ``RecordPipeline`` (its application's tree, the matching index, the
/// events of SPEC §6), the notices of the whole batch are resolved against the stored
/// subscriptions in one read, and each is built into its payload (SPEC §7) by the
/// ``NotificationBuilder``. Nothing is written here: the ``BatchWriter`` commits the result.
///
/// The single instance's ``Ingestor`` and the shared instances' ``ApplicationOwner`` both run
/// their records through it; they differ only in where records come from and how the batch
/// commits.
public struct RecordEngine: Sendable {
    public struct Configuration: Sendable {
        /// A snapshot of an application's tree is due once this many bytes of its records were
        /// journalled since the last one. Default 64 MiB.
        public var snapshotAfterBytes: Int
        /// Whether the delivery history is kept (SPEC §13.2): the batches then carry the
        /// subscriptions their records concerned that get nothing, and why.
        public var keepsHistory: Bool

        public init(snapshotAfterBytes: Int = 64 << 20, keepsHistory: Bool = false) {
            self.snapshotAfterBytes = snapshotAfterBytes
            self.keepsHistory = keepsHistory
        }
    }

    var pipeline: RecordPipeline
    var builder: NotificationBuilder
    /// Journal bytes since each application's snapshot (the snapshot policy's measure).
    var journalBytes: [String: Int]
    let registry: SubscriptionRegistry
    /// The configured applications' settings (others get ``PipelineSettings/standard``).
    let settings: [String: PipelineSettings]
    /// Where the trees are published for the REST API's rule checks (`nil`: no rule reads data).
    let view: TreeView?
    let configuration: Configuration
    let logger: Logger

    /// - Parameters:
    ///   - trees: the trees as loaded at start (``TreeLoader``), or none (an owner loads each
    ///     application's when it takes it).
    ///   - settings: the configured applications' settings, read rules included.
    ///   - view: where to publish the trees for the REST API's rule checks.
    public init(
        trees: TreeLoader.Loaded = TreeLoader.Loaded(), settings: [String: PipelineSettings], sealers: any SealerProvider,
        registry: SubscriptionRegistry, view: TreeView? = nil, configuration: Configuration = Configuration(), logger: Logger
    ) {
        self.pipeline = RecordPipeline(processor: trees.processor, settings: { settings[$0] ?? .standard })
        self.builder = NotificationBuilder(sealers: sealers, webPushNotifications: settings.compactMapValues(\.webPushNotification))
        self.journalBytes = trees.journalBytes
        self.registry = registry
        self.settings = settings
        self.view = view
        self.configuration = configuration
        self.logger = logger
        if let view {
            for (app, tree) in trees.processor.trees { view.publish(tree, app: app) }
        }
    }

    /// The configured rules of `app` when they are to be checked again (they read data, or
    /// use `now`).
    func trackedRules(_ app: String) -> ReadRules? {
        guard let rules = settings[app]?.rules, rules.rechecked else { return nil }
        return rules
    }

    /// Applies the accepted records of `lines` in order: the trees move on, the notifications
    /// are built. Throws only when the stored subscriptions cannot be read
    /// (after retries, at a stop); nothing is written.
    ///
    /// `admitting`: subscriptions created or changed since the last batch (handle →
    /// application, ``SubscriptionRegistry/takeAdmissions()``); their access is checked against
    /// the trees as they are before this batch's records reach them.
    ///
    /// The index is not changed here: what the records do to it (revocations, admissions) is
    /// the batch's ``PreparedBatch/effects``, which the ``BatchWriter`` applies once the batch
    /// committed. `committing`: the effects of an earlier batch that commits meanwhile (not
    /// applied yet), which this batch's records must see too.
    public mutating func prepare(
        _ lines: CheckedLines, now: Int64, admitting: [Int64: String] = [:], committing: IndexEffects = IndexEffects()
    ) async throws -> PreparedBatch {
        var prepared = PreparedBatch(batch: CommitBatch(now: now), intake: lines)
        prepared.batch.checkpoints = lines.checkpoints
        prepared.batch.keepsHistory = configuration.keepsHistory
        var overlay = committing.isEmpty ? IndexOverlay() : IndexOverlay(after: committing)
        try await admit(admitting, into: &prepared, overlay: &overlay, now: now)
        // The records are applied in order; the notices of the batch's writes are resolved
        // against the stored subscriptions in one read of the directory, then built.
        // Records are read in place (not copied out of `lines`: a copy retains every part of
        // the record and of its line); a write that needs nothing from the directory (the
        // common case) is staged without suspending.
        var staged: [(seq: Int64, notices: RecordPipeline.PendingNotices)] = []
        for index in lines.accepted.indices {
            let sourceBytes = lines.accepted[index].line.bytes.count
            let outcome: RecordPipeline.Staged
            if let staged = pipeline.stageWrite(lines.accepted[index].record, lookup: registry, overlay: &overlay, sourceBytes: sourceBytes) {
                outcome = staged
            } else {
                outcome = try await stageReadingDirectory(lines.accepted[index].record, overlay: &overlay, now: now, sourceBytes: sourceBytes)
            }
            if outcome.changedTree {
                let app = lines.accepted[index].record.app
                prepared.batch.journal[app, default: []] += lines.accepted[index].line.bytes
                prepared.batch.journal[app]!.append(UInt8(ascii: "\n"))
            }
            if !outcome.notices.isEmpty { staged.append((lines.accepted[index].record.seq, outcome.notices)) }
        }
        let handles = staged.flatMap(\.notices.handles)
        let stored =
            handles.isEmpty
            ? [:] : try await retryingIngestion("reading subscriptions", logger: logger) { try await registry.subscriptions(handles: handles) }
        for (seq, pending) in staged {
            for notice in pending.resolve(stored) {
                append(notice, seq: seq, to: &prepared)
            }
        }
        for (app, bytes) in prepared.batch.journal {
            if let view, trackedRules(app) != nil { view.publish(pipeline.processor.trees[app] ?? DataTree(), app: app) }
            journalBytes[app, default: 0] += bytes.count
            if journalBytes[app]! >= configuration.snapshotAfterBytes {
                prepared.snapshots.append((app, pipeline.processor.trees[app] ?? DataTree()))
                journalBytes[app] = 0
            }
        }
        prepared.effects = overlay.effects
        return prepared
    }

    /// A record whose staging reads the directory (a revocation record, a write under rules
    /// that read data); only a failed read goes through the retry loop.
    mutating func stageReadingDirectory(
        _ record: ChangeRecord, overlay: inout IndexOverlay, now: Int64, sourceBytes: Int
    ) async throws -> RecordPipeline.Staged {
        do {
            return try await pipeline.stage(record, lookup: registry, directory: registry, overlay: &overlay, now: now, sourceBytes: sourceBytes)
        } catch let error as StoreError where error.kind == .leaseLost {
            throw error
        } catch {
            logger.warning("reading subscriptions failed; retrying", metadata: ["error": "\(error)"])
            return try await retryingIngestion("reading subscriptions", logger: logger) {
                try await pipeline.stage(record, lookup: registry, directory: registry, overlay: &overlay, now: now, sourceBytes: sourceBytes)
            }
        }
    }

    /// Builds one notice into the batch, in delivery order (`seq`: the record that led to it).
    mutating func append(_ notice: Notice, seq: Int64?, to prepared: inout PreparedBatch) {
        let entry: OutboxEntry?
        do {
            let built = try builder.payload(notice)
            entry = OutboxEntry(notice, payload: built.bytes, recordSeq: seq)
            if case .revoke(let reason) = notice.event.body {
                prepared.intake.counts.revocations[reason.rawValue, default: 0] += 1
            } else {
                prepared.intake.counts.event(mode: notice.subscription.mode, status: built.status)
            }
        } catch {
            logger.error(
                "a notification cannot be built; it is not sent",
                metadata: ["subscription": "\(notice.subscription.id)", "seq": "\(seq.map(String.init) ?? "-")", "error": "\(error)"])
            entry = nil
        }
        let handle = notice.subscription.handle ?? 0
        if notice.revokes {
            if configuration.keepsHistory, let seq, case .revoke(let reason) = notice.event.body {
                prepared.batch.skips.append(
                    RecordSkip(app: notice.subscription.app, seq: seq, subscription: notice.subscription.id, why: RecordSkip.Why(revocation: reason), at: prepared.batch.now))
            }
            prepared.batch.operations.append(.revoke(handle: handle, notification: entry, condition: .exists))
        } else if let entry {
            prepared.batch.operations.append(.notify(entry))
        }
    }

    /// Takes over an application's tree as stored (an owner that took its lease).
    public mutating func load(app: String, tree: DataTree, journalBytes bytes: Int) {
        pipeline.processor.setTree(tree, app: app)
        journalBytes[app] = bytes
        if let view, trackedRules(app) != nil { view.publish(tree, app: app) }
    }

    /// Forgets an application this instance no longer processes.
    public mutating func forget(app: String) {
        pipeline.processor.setTree(DataTree(), app: app)
        journalBytes[app] = nil
        view?.withdraw(app: app)
    }
}

/// A batch of records processed, to commit: its outbox operations, journal and checkpoints, and
/// what its lines leave (dead letters, answers, counts), with what it does to the index and the
/// trees whose snapshots are due once it committed.
public struct PreparedBatch: Sendable {
    public var batch: CommitBatch
    public var intake: CheckedLines
    /// What its records do to the in-memory index (revocations, admissions): applied once it
    /// committed.
    public var effects = IndexEffects()
    /// Trees to snapshot once the batch committed (the trees as of this batch).
    public var snapshots: [(app: String, tree: DataTree)] = []

    public init(batch: CommitBatch, intake: CheckedLines) {
        self.batch = batch
        self.intake = intake
    }
}
