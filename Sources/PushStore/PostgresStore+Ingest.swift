import Foundation
import Logging
import PostgresNIO
import PushCore
import PushContracts

extension PostgresStore: IngestStore {
    /// Snapshot chunks: a large tree is written over several short transactions.
    static let snapshotChunkBytes = 4 << 20

    /// The database's clock in milliseconds: leases are timed by it, so that instances whose
    /// clocks disagree still agree on who holds what.
    static let databaseMilliseconds = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"

    public func commit(_ batch: CommitBatch) async throws -> CommitResult {
        try await commit(batch, fence: nil)
    }

    public func commit(_ batch: CommitBatch, fence: LeaseFence) async throws -> CommitResult {
        try await commit(batch, fence: Optional(fence))
    }

    /// One transaction: the fence checked first (when given), then the outbox operations, the
    /// journal, the checkpoints, and the consumed inbox rows.
    func commit(_ batch: CommitBatch, fence: LeaseFence?) async throws -> CommitResult {
        var result = CommitResult()
        var skips = batch.skips
        let operations = SQLiteStore.coalescedInBatch(
            batch.operations, coalesced: &result.coalesced, skips: &skips, keepingHistory: batch.keepsHistory, now: batch.now)
        let initial = result
        let initialSkips = skips
        let history: HistoryWrite? = batch.keepsHistory ? HistoryWrite(now: batch.now) : nil
        // A revocation deletes a subscription: it takes the subscription writers' lock first,
        // as every writer of subscriptions does (no lock-order deadlock with the API).
        let revokes = operations.contains { if case .revoke = $0 { true } else { false } }
        return try await transaction(writerLock: revokes) { connection in
            var result = initial
            var skips = initialSkips
            var history = history
            if let fence { try await self.check(fence, connection) }
            // Runs of notifications go in two statements (replace the waiting ones in place,
            // insert the others in order); a revocation ends a run, as its order matters.
            var run: [OutboxEntry] = []
            for operation in operations {
                switch operation {
                case .notify(let entry):
                    run.append(entry)
                case .revoke(let handle, let entry, let condition):
                    try await self.writeNotifications(run, now: batch.now, into: &result, history: &history, connection)
                    run.removeAll()
                    let deleted: Int
                    switch condition {
                    case .exists:
                        deleted = try await connection.query("DELETE FROM subscription WHERE handle = \(handle) RETURNING handle", logger: self.logger)
                            .collect().count
                    case .expiredBy(let now):
                        deleted = try await connection.query(
                            "DELETE FROM subscription WHERE handle = \(handle) AND expires_at <= \(now) RETURNING handle", logger: self.logger
                        ).collect().count
                    case .alreadyRemoved:
                        deleted = 0
                    }
                    guard condition == .alreadyRemoved || deleted > 0 else { continue }
                    if condition != .alreadyRemoved { result.revoked.append(handle) }
                    let dropped = try await connection.query(
                        """
                        DELETE FROM notification WHERE subscription_handle = \(handle) AND coalescable AND claimed_until IS NULL
                        RETURNING app, record_seq, subscription_id
                        """, logger: self.logger
                    ).decode((String, Int64?, String).self)
                    let why: RecordSkip.Why = if case .expiredBy = condition { .expired } else { .revoked }
                    for try await (app, seq, subscription) in dropped {
                        result.coalesced += 1
                        if history != nil, let seq { skips.append(RecordSkip(app: app, seq: seq, subscription: subscription, why: why, at: batch.now)) }
                    }
                    if let entry {
                        _ = try await connection.query(Self.insertNotification(entry, now: batch.now), logger: self.logger)
                            .collect()
                        result.queued += 1
                    }
                }
            }
            try await self.writeNotifications(run, now: batch.now, into: &result, history: &history, connection)
            if let history { try await Self.insertSkips(skips + history.skips, on: connection, logger: self.logger) }
            for app in batch.journal.keys.sorted() {
                let rows = try await connection.query(
                    "INSERT INTO tree_journal (app, records) VALUES (\(app), \(ByteBuffer(bytes: batch.journal[app]!))) RETURNING id",
                    logger: self.logger
                ).collect()
                result.journalIDs[app] = try rows.first?.decode(Int64.self)
            }
            try await Self.store(batch.checkpoints, on: connection, logger: self.logger)
            if let consumed = fence?.consumed, !consumed.isEmpty {
                try await connection.query("DELETE FROM inbox WHERE id = ANY(\(consumed))", logger: self.logger)
            }
            return result
        }
    }

    /// Fencing: the batch's lease is locked (shared) and checked before anything is written,
    /// so no instance can take it over until this transaction ends, and a holder that lost it
    /// (paused past its expiry) writes nothing.
    func check(_ fence: LeaseFence, _ connection: PostgresSession) async throws {
        let rows = try await connection.query(
            """
            SELECT token FROM app_lease
            WHERE app = \(fence.app) AND owner = \(fence.holder) AND expires_at > \(unescaped: Self.databaseMilliseconds)
            FOR SHARE
            """, logger: logger)
        var held: Int64?
        for try await token in rows.decode(Int64.self) { held = token }
        guard held == fence.token else { throw StoreError.leaseLost(app: fence.app) }
    }

    static let notificationColumns = """
        id, app, subscription_handle, subscription_id, kind, target, destination, event, payload, record_seq, created_at,
        next_attempt_at, first_attempt_at, attempts
        """

    /// Writes a run of notifications (no two coalescing ones of one subscription: the batch
    /// was coalesced). A coalescing one takes the place of its subscription's newest waiting
    /// (unclaimed) coalescable notification when there is one; the others are inserted in
    /// their order, only for subscriptions that still exist.
    func writeNotifications(
        _ entries: [OutboxEntry], now: Int64, into result: inout CommitResult, history: inout HistoryWrite?, _ connection: PostgresSession
    ) async throws {
        if entries.isEmpty { return }
        var replaced = Set<Int64>()
        let coalescing = entries.filter(\.notification.coalesces)
        if !coalescing.isEmpty {
            // The outer condition is checked again if a claim raced for the row. `prior` is the
            // row as it was (the record it came from, for the history).
            let rows = try await connection.query(
                """
                UPDATE notification SET event = u.event, payload = u.payload, record_seq = CASE WHEN u.has_seq THEN u.seq END
                FROM unnest(\(coalescing.map(\.subscriptionHandle))::bigint[], \(coalescing.map(\.notification.rawValue))::text[],
                            \(coalescing.map { ByteBuffer(bytes: $0.payload) })::bytea[], \(coalescing.map { $0.recordSeq ?? 0 })::bigint[],
                            \(coalescing.map { $0.recordSeq != nil })::boolean[])
                     AS u(handle, event, payload, seq, has_seq),
                     notification prior
                WHERE notification.id = (SELECT max(id) FROM notification
                                         WHERE subscription_handle = u.handle AND coalescable AND claimed_until IS NULL)
                  AND notification.claimed_until IS NULL AND prior.id = notification.id
                RETURNING notification.subscription_handle, notification.app, prior.record_seq, notification.record_seq, prior.subscription_id
                """, logger: logger)
            for try await (handle, app, before, after, subscription) in rows.decode((Int64, String, Int64?, Int64?, String).self) {
                replaced.insert(handle)
                if history != nil, let before, before != after {
                    history!.skips.append(RecordSkip(app: app, seq: before, subscription: subscription, why: .coalesced, at: now))
                }
            }
            result.coalesced += replaced.count
        }
        let inserted = replaced.isEmpty ? entries : entries.filter { !($0.notification.coalesces && replaced.contains($0.subscriptionHandle)) }
        if inserted.isEmpty { return }
        let rows = try await connection.query(
            """
            INSERT INTO notification (app, subscription_handle, subscription_id, kind, target, destination, event, coalescable,
                                      payload, record_seq, created_at, next_attempt_at)
            SELECT e.app, e.handle, e.id, e.kind, CASE WHEN e.has_target THEN e.target END, CASE WHEN e.has_destination THEN e.destination END,
                   e.event, e.coalescable, e.payload, CASE WHEN e.has_seq THEN e.seq END, \(now), \(now)
            FROM unnest(\(inserted.map(\.app))::text[], \(inserted.map(\.subscriptionHandle))::bigint[], \(inserted.map(\.subscriptionID))::text[],
                        \(inserted.map(\.kind.rawValue))::text[], \(inserted.map { $0.target ?? "" })::text[], \(inserted.map { $0.target != nil })::boolean[],
                        \(inserted.map { $0.destination ?? "" })::text[], \(inserted.map { $0.destination != nil })::boolean[],
                        \(inserted.map(\.notification.rawValue))::text[], \(inserted.map(\.notification.coalesces))::boolean[],
                        \(inserted.map { ByteBuffer(bytes: $0.payload) })::bytea[], \(inserted.map { $0.recordSeq ?? 0 })::bigint[],
                        \(inserted.map { $0.recordSeq != nil })::boolean[])
                 WITH ORDINALITY AS e(app, handle, id, kind, target, has_target, destination, has_destination, event, coalescable,
                                      payload, seq, has_seq, n)
            WHERE EXISTS (SELECT 1 FROM subscription WHERE subscription.handle = e.handle)
            ORDER BY e.n
            RETURNING subscription_handle
            """, logger: logger)
        var queued = Set<Int64>()
        for try await handle in rows.decode(Int64.self) {
            result.queued += 1
            queued.insert(handle)
        }
        if history != nil {
            // Those not queued: their subscription is gone.
            for entry in inserted where !queued.contains(entry.subscriptionHandle) {
                guard let seq = entry.recordSeq else { continue }
                history!.skips.append(RecordSkip(app: entry.app, seq: seq, subscription: entry.subscriptionID, why: .revoked, at: now))
            }
        }
    }

    /// The history's share of a commit: the skips the store itself decides.
    struct HistoryWrite {
        var now: Int64
        var skips: [RecordSkip] = []
    }

    static func insertSkips(_ skips: [RecordSkip], on connection: PostgresSession, logger: Logger) async throws {
        guard !skips.isEmpty else { return }
        try await connection.query(
            """
            INSERT INTO record_skip (app, seq, subscription, why, at)
            SELECT * FROM unnest(\(skips.map(\.app))::text[], \(skips.map(\.seq))::bigint[], \(skips.map(\.subscription))::text[],
                                 \(skips.map(\.why.rawValue))::text[], \(skips.map(\.at))::bigint[])
            """, logger: logger)
    }

    static func insertAttempts(_ attempts: [DeliveryAttempt], on connection: PostgresSession, logger: Logger) async throws {
        guard !attempts.isEmpty else { return }
        try await connection.query(
            """
            INSERT INTO delivery_attempt (notification, subscription, app, seq, provider, destination, attempt, at, status, reason, latency_ms,
                                          outcome, next_at)
            SELECT a.notification, a.subscription, a.app, CASE WHEN a.has_seq THEN a.seq END, a.provider,
                   CASE WHEN a.has_destination THEN a.destination END, a.attempt, a.at, CASE WHEN a.has_status THEN a.status END,
                   CASE WHEN a.has_reason THEN a.reason END, CASE WHEN a.has_latency THEN a.latency END, a.outcome,
                   CASE WHEN a.has_next THEN a.next END
            FROM unnest(\(attempts.map(\.notification))::bigint[], \(attempts.map(\.subscription))::text[], \(attempts.map(\.app))::text[],
                        \(attempts.map { $0.seq ?? 0 })::bigint[], \(attempts.map { $0.seq != nil })::boolean[], \(attempts.map(\.provider))::text[],
                        \(attempts.map { $0.destination ?? "" })::text[], \(attempts.map { $0.destination != nil })::boolean[],
                        \(attempts.map { Int64($0.attempt) })::bigint[], \(attempts.map(\.at))::bigint[],
                        \(attempts.map { Int32(clamping: $0.status ?? 0) })::integer[], \(attempts.map { $0.status != nil })::boolean[],
                        \(attempts.map { $0.reason ?? "" })::text[], \(attempts.map { $0.reason != nil })::boolean[],
                        \(attempts.map { $0.latencyMs ?? 0 })::bigint[], \(attempts.map { $0.latencyMs != nil })::boolean[],
                        \(attempts.map(\.outcome.rawValue))::text[], \(attempts.map { $0.nextAt ?? 0 })::bigint[], \(attempts.map { $0.nextAt != nil })::boolean[])
                 AS a(notification, subscription, app, seq, has_seq, provider, destination, has_destination, attempt, at, status, has_status,
                      reason, has_reason, latency, has_latency, outcome, next, has_next)
            """, logger: logger)
    }

    /// The columns copied into `discarded_notification` (SPEC §13.3), and their source.
    static let discardedColumns = """
        id, app, subscription_handle, subscription_id, kind, target, destination, event, coalescable, payload, record_seq, created_at
        """

    /// Keeps a subscription's notifications for recovery before they are discarded.
    static func keepDiscarded(subscription handle: Int64, now: Int64, on connection: PostgresSession, logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO discarded_notification (\(unescaped: discardedColumns), discarded_at)
            SELECT \(unescaped: discardedColumns), \(now) FROM notification WHERE subscription_handle = \(handle)
            ON CONFLICT (id) DO NOTHING
            """, logger: logger)
    }

    /// Inserts a revocation's notice `entry`, created and first due at `now` (its subscription
    /// is gone by then; other notifications go through ``writeNotifications(_:now:into:_:)``).
    static func insertNotification(_ entry: OutboxEntry, now: Int64) -> PostgresQuery {
        """
        INSERT INTO notification (app, subscription_handle, subscription_id, kind, target, destination, event, coalescable,
                                  payload, record_seq, created_at, next_attempt_at)
        VALUES (\(entry.app), \(entry.subscriptionHandle), \(entry.subscriptionID), \(entry.kind.rawValue), \(entry.target),
                \(entry.destination), \(entry.notification.rawValue), \(entry.notification.coalesces), \(ByteBuffer(bytes: entry.payload)),
                \(entry.recordSeq), \(now), \(now))
        RETURNING id
        """
    }

    static func notification(_ row: PostgresRow) throws -> StoredNotification {
        let (id, app, handle, subscriptionID, kindText, target, destination, eventText, payload, recordSeq, createdAt, next, first, attempts) =
            try row.decode(
                (Int64, String, Int64, String, String, String?, String?, String, ByteBuffer, Int64?, Int64, Int64, Int64?, Int64).self)
        guard let kind = SubscriptionKind(rawValue: kindText), let event = NotificationKind(rawValue: eventText) else {
            throw StoreError.corrupt("a notification row has an unknown kind or event")
        }
        let entry = OutboxEntry(
            app: app, subscriptionHandle: handle, subscriptionID: subscriptionID, kind: kind, target: target, destination: destination,
            notification: event, payload: Array(payload.readableBytesView), recordSeq: recordSeq)
        return StoredNotification(
            id: id, entry: entry, createdAt: createdAt, nextAttemptAt: next, attempts: Int(clamping: attempts), firstAttemptAt: first)
    }

    public func checkpoints() async throws -> [SourceCheckpoint] {
        var checkpoints: [SourceCheckpoint] = []
        try await run { session in
            let rows = try await session.query("SELECT source, last_seq, position, file_identity FROM source_checkpoint ORDER BY source")
            for try await (source, lastSeq, position, identity) in rows.decode((String, Int64?, Int64, String?).self) {
                checkpoints.append(SourceCheckpoint(source: source, lastSeq: lastSeq, position: position, fileIdentity: identity))
            }
        }
        return checkpoints
    }

    public func treeApplications() async throws -> [String] {
        var apps: [String] = []
        try await run { session in
            let rows = try await session.query("SELECT app FROM tree_head UNION SELECT DISTINCT app FROM tree_journal ORDER BY 1")
            for try await app in rows.decode(String.self) { apps.append(app) }
        }
        return apps
    }

    public func tree(app: String) async throws -> StoredTree {
        var stored = StoredTree(snapshot: nil, snapshotThrough: 0, journal: [])
        try await run { session in
            try await session.withTransaction(logger: self.logger) { connection in
                // One snapshot of the database: the head, its chunks and the journal after it.
                try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", logger: self.logger)
                var head: (generation: Int64, chunks: Int64, through: Int64)?
                for try await row in try await connection.query(
                    "SELECT generation, chunks, through_journal FROM tree_head WHERE app = \(app)", logger: self.logger
                ).decode((Int64, Int64, Int64).self) { head = row }
                if let head {
                    stored.snapshotThrough = head.through
                    var bytes: [UInt8] = []
                    var expected: Int64 = 0
                    for try await (chunk, buffer) in try await connection.query(
                        "SELECT chunk, bytes FROM tree_snapshot WHERE app = \(app) AND generation = \(head.generation) ORDER BY chunk",
                        logger: self.logger
                    ).decode((Int64, ByteBuffer).self) {
                        guard chunk == expected else { break }
                        bytes += buffer.readableBytesView
                        expected += 1
                    }
                    guard expected == head.chunks else {
                        throw StoreError.corrupt("the snapshot of \(app) has \(expected) of its \(head.chunks) chunks")
                    }
                    stored.snapshot = bytes
                }
                for try await (id, records) in try await connection.query(
                    "SELECT id, records FROM tree_journal WHERE app = \(app) AND id > \(stored.snapshotThrough) ORDER BY id", logger: self.logger
                ).decode((Int64, ByteBuffer).self) {
                    stored.journal.append((id: id, lines: Array(records.readableBytesView)))
                }
            }
        }
        return stored
    }

    public func saveSnapshot(app: String, tree: [UInt8], through: Int64) async throws {
        // Two instances may write one application's snapshot at once (an owner that lost the
        // application and the new one). Each writes its chunks under a generation of its own
        // (drawn from a sequence); the head moves only forward (a later generation covering at
        // least as much journal); the loser's chunks go, and chunks of a later generation still
        // being written stay.
        var generation: Int64 = 0
        try await run { session in
            for try await value in try await session.query("SELECT nextval('tree_generation')").decode(Int64.self) { generation = value }
        }
        var chunks: Int64 = 0
        var offset = 0
        repeat {
            let end = min(tree.count, offset + Self.snapshotChunkBytes)
            let chunk = ByteBuffer(bytes: tree[offset..<end])
            let index = chunks
            _ = try await transaction(writerLock: false) { connection in
                try await connection.query(
                    "INSERT INTO tree_snapshot (app, generation, chunk, bytes) VALUES (\(app), \(generation), \(index), \(chunk))", logger: self.logger)
            }
            chunks += 1
            offset = end
        } while offset < tree.count
        let count = chunks
        try await transaction(writerLock: false) { connection in
            let moved = try await connection.query(
                """
                INSERT INTO tree_head (app, generation, chunks, through_journal) VALUES (\(app), \(generation), \(count), \(through))
                ON CONFLICT (app) DO UPDATE SET generation = excluded.generation, chunks = excluded.chunks,
                                                through_journal = excluded.through_journal
                WHERE tree_head.generation < excluded.generation AND tree_head.through_journal <= excluded.through_journal
                RETURNING app
                """, logger: self.logger
            ).collect().count
            guard moved > 0 else {
                try await connection.query(
                    "DELETE FROM tree_snapshot WHERE app = \(app) AND generation = \(generation)", logger: self.logger)
                return
            }
            try await connection.query(
                "DELETE FROM tree_snapshot WHERE app = \(app) AND generation < \(generation)", logger: self.logger)
            try await connection.query("DELETE FROM tree_journal WHERE app = \(app) AND id <= \(through)", logger: self.logger)
        }
    }

    public func dueSubscriptions(now: Int64, limit: Int) async throws -> [Subscription] {
        try await reading(
            "SELECT \(unescaped: Self.columns) FROM subscription WHERE expires_at <= \(now) ORDER BY expires_at, handle LIMIT \(Int64(limit))")
    }

    /// PostgreSQL stores never had the version-1 outbox.
    public func legacyRevocations(limit: Int) async throws -> [OutboxItem] { [] }

    public func notifications(limit: Int) async throws -> [StoredNotification] {
        var notifications: [StoredNotification] = []
        try await run { session in
            for row in try await session.query(
                "SELECT \(unescaped: Self.notificationColumns) FROM notification ORDER BY id LIMIT \(Int64(limit))"
            ).collect() {
                notifications.append(try Self.notification(row))
            }
        }
        return notifications
    }

    public func outboxDepth() async throws -> (count: Int, oldest: Int64?) {
        // The count its triggers keep; the oldest by insertion (the primary key's first row).
        let count = try await tally()["notification"] ?? 0
        var oldest: Int64?
        try await run { session in
            for try await value in try await session.query("SELECT created_at FROM notification ORDER BY id LIMIT 1").decode(Int64.self) {
                oldest = value
            }
        }
        return (max(0, count), oldest)
    }
}

extension PostgresStore {
    public func resetWatermark(source: String, lastSeq: Int64?) async throws -> Bool {
        var changed = 0
        try await run { session in
            changed = try await session.query(
                "UPDATE source_checkpoint SET last_seq = \(lastSeq) WHERE source = \(source) RETURNING source"
            ).collect().count
        }
        return changed > 0
    }

    /// Writes where each source stands, inside the caller's transaction (a batch commit, an
    /// inbox enqueue, an import).
    static func store(_ checkpoints: [SourceCheckpoint], on connection: PostgresSession, logger: Logger) async throws {
        for checkpoint in checkpoints {
            try await connection.query(
                """
                INSERT INTO source_checkpoint (source, last_seq, position, file_identity)
                VALUES (\(checkpoint.source), \(checkpoint.lastSeq), \(checkpoint.position), \(checkpoint.fileIdentity))
                ON CONFLICT (source) DO UPDATE SET last_seq = excluded.last_seq, position = excluded.position,
                                                   file_identity = excluded.file_identity
                """, logger: logger)
        }
    }
}
