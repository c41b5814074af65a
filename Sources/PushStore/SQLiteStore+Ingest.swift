import Foundation
import GRDB
import PushCore
import PushContracts

extension SQLiteStore: IngestStore {
    /// Snapshot chunks: a large tree is written over several short transactions.
    static let snapshotChunkBytes = 4 << 20

    public func commit(_ batch: CommitBatch) async throws -> CommitResult {
        var result = CommitResult()
        var batchSkips = batch.skips
        let operations = Self.coalescedInBatch(
            batch.operations, coalesced: &result.coalesced, skips: &batchSkips, keepingHistory: batch.keepsHistory, now: batch.now)
        let initial = result
        let initialSkips = batchSkips
        let keepsHistory = batch.keepsHistory
        return try await write { db in
            var result = initial
            var skips = initialSkips
            // A value/noData notification replaces the content of its subscription's waiting one
            // in place: the row keeps its place, creation time and retry schedule (a
            // subscription that is backing off stays so), and no index changes.
            let replaceWaiting = try RawStatement(
                db,
                """
                UPDATE notification SET event = ?, payload = ?, record_seq = ?
                WHERE id = (SELECT max(id) FROM notification
                            WHERE subscription_handle = ? AND coalescable = 1 AND claimed_until IS NULL)
                """)
            // With the history on, the same, appending the replaced record's seq to the
            // notification's `coalesced` list (moved to `record_coalesced` with it, or by a
            // trigger once it is full: SQLite v9).
            let replaceWaitingNoting = try RawStatement(
                db,
                """
                UPDATE notification SET event = ?1, payload = ?2, record_seq = ?3,
                    coalesced = CASE WHEN record_seq IS NULL OR record_seq IS ?3 THEN coalesced
                                     ELSE coalesce(coalesced || ',', '') || record_seq END,
                    coalesced_first = CASE WHEN record_seq IS NULL OR record_seq IS ?3 THEN coalesced_first
                                           ELSE min(coalesce(coalesced_first, record_seq), record_seq) END,
                    coalesced_last = CASE WHEN record_seq IS NULL OR record_seq IS ?3 THEN coalesced_last
                                          ELSE max(coalesce(coalesced_last, record_seq), record_seq) END,
                    coalesced_at = CASE WHEN record_seq IS NULL OR record_seq IS ?3 THEN coalesced_at ELSE ?5 END
                WHERE id = (SELECT max(id) FROM notification
                            WHERE subscription_handle = ?4 AND coalescable = 1 AND claimed_until IS NULL)
                """)
            let dropWaiting = try RawStatement(
                db, "DELETE FROM notification WHERE subscription_handle = ? AND coalescable = 1 AND claimed_until IS NULL")
            // With the history on: the record a waiting notification came from, before it is
            // replaced or dropped.
            func waiting(_ handle: Int64) throws -> [(app: String, seq: Int64, subscription: String)] {
                try Row.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT app, record_seq, subscription_id FROM notification
                            WHERE subscription_handle = ? AND coalescable = 1 AND claimed_until IS NULL AND record_seq IS NOT NULL
                            ORDER BY id DESC
                            """), arguments: [handle]
                ).map { ($0[0], $0[1], $0[2]) }
            }
            let insertIfSubscribed = try RawStatement(
                db, Self.insertNotificationSQL + " SELECT \(Self.notificationMarks) WHERE EXISTS (SELECT 1 FROM subscription WHERE handle = ?)")
            let insert = try RawStatement(db, Self.insertNotificationSQL + " VALUES (\(Self.notificationMarks))")
            func bindRow(_ binder: inout RawStatement.Binder, _ entry: OutboxEntry) throws {
                try Self.bindNotification(&binder, entry, now: batch.now)
            }
            for operation in operations {
                switch operation {
                case .notify(let entry):
                    if entry.notification.coalesces {
                        var replaced = 0
                        if keepsHistory {
                            // The same replacement, noting the record the replaced one came from.
                            replaced = try replaceWaitingNoting.run(pinning: entry.payload) { binder in
                                try binder.bind(entry.notification.rawValue)
                                try binder.bindPinned()
                                try binder.bind(entry.recordSeq)
                                try binder.bind(entry.subscriptionHandle)
                                try binder.bind(batch.now)
                            }
                        } else {
                            replaced = try replaceWaiting.run(pinning: entry.payload) { binder in
                                try binder.bind(entry.notification.rawValue)
                                try binder.bindPinned()
                                try binder.bind(entry.recordSeq)
                                try binder.bind(entry.subscriptionHandle)
                            }
                        }
                        if replaced > 0 {
                            result.coalesced += replaced
                            continue
                        }
                    }
                    let queued = try insertIfSubscribed.run(pinning: entry.payload) { binder in
                        try bindRow(&binder, entry)
                        try binder.bind(entry.subscriptionHandle)
                    }
                    result.queued += queued
                    if queued == 0, keepsHistory, let seq = entry.recordSeq {
                        skips.append(RecordSkip(app: entry.app, seq: seq, subscription: entry.subscriptionID, why: .revoked, at: batch.now))
                    }
                case .revoke(let handle, let entry, let condition):
                    switch condition {
                    case .exists:
                        try db.cachedStatement(sql: "DELETE FROM subscription WHERE handle = ?").execute(arguments: [handle])
                    case .expiredBy(let now):
                        try db.cachedStatement(sql: "DELETE FROM subscription WHERE handle = ? AND expires_at <= ?").execute(arguments: [handle, now])
                    case .alreadyRemoved:
                        break
                    }
                    guard condition == .alreadyRemoved || db.changesCount > 0 else { continue }
                    if condition != .alreadyRemoved { result.revoked.append(handle) }
                    if keepsHistory {
                        let why: RecordSkip.Why = if case .expiredBy = condition { .expired } else { .revoked }
                        for dropped in try waiting(handle) {
                            skips.append(RecordSkip(app: dropped.app, seq: dropped.seq, subscription: dropped.subscription, why: why, at: batch.now))
                        }
                    }
                    result.coalesced += try dropWaiting.run { try $0.bind(handle) }
                    if let entry {
                        try insert.run(pinning: entry.payload) { try bindRow(&$0, entry) }
                        result.queued += 1
                    }
                }
            }
            let journal = try RawStatement(db, "INSERT INTO tree_journal (app, records) VALUES (?, ?)")
            for app in batch.journal.keys.sorted() {
                try journal.run(pinning: batch.journal[app]!) { binder in
                    try binder.bind(app)
                    try binder.bindPinned()
                }
                result.journalIDs[app] = db.lastInsertedRowID
            }
            for checkpoint in batch.checkpoints {
                try db.cachedStatement(
                    sql: """
                        INSERT INTO source_checkpoint (source, last_seq, position, file_identity) VALUES (?, ?, ?, ?)
                        ON CONFLICT (source) DO UPDATE SET last_seq = excluded.last_seq, position = excluded.position,
                                                           file_identity = excluded.file_identity
                        """
                ).execute(arguments: [checkpoint.source, checkpoint.lastSeq, checkpoint.position, checkpoint.fileIdentity])
            }
            for sequence in batch.legacyProcessed {
                try db.cachedStatement(sql: "DELETE FROM outbox WHERE sequence = ?").execute(arguments: [sequence])
            }
            if keepsHistory { try Self.insertSkips(db, skips) }
            return result
        }
    }

    /// How far back from a record's seq its lookup searches the moved `coalesced` lists: a
    /// list spans less (the trigger that moves a full list, SQLite v9).
    static let coalescedSpan: Int64 = 1 << 20

    /// The columns a new notification row gets; `notificationMarks` (one `?` each) and
    /// ``bindNotification(_:_:now:)`` go with it.
    static let insertNotificationSQL = """
        INSERT INTO notification (app, subscription_handle, subscription_id, kind, target, destination, event, coalescable,
                                  payload, record_seq, created_at, next_attempt_at)
        """
    static let notificationMarks = Array(repeating: "?", count: 12).joined(separator: ", ")

    /// Binds a new notification row of `entry`, created and first due at `now`, inside a
    /// ``RawStatement/run(pinning:_:)`` of `entry.payload`.
    static func bindNotification(_ binder: inout RawStatement.Binder, _ entry: OutboxEntry, now: Int64) throws {
        try binder.bind(entry.app)
        try binder.bind(entry.subscriptionHandle)
        try binder.bind(entry.subscriptionID)
        try binder.bind(entry.kind.rawValue)
        try binder.bind(entry.target)
        try binder.bind(entry.destination)
        try binder.bind(entry.notification.rawValue)
        try binder.bind(entry.notification.coalesces)
        try binder.bindPinned()
        try binder.bind(entry.recordSeq)
        try binder.bind(now)
        try binder.bind(now)
    }

    /// Coalesces `value`/`noData` notifications of one subscription within the batch as the
    /// store does across batches: the first one waiting takes the content of the last, which is
    /// dropped (counted in `coalesced`). So the outbox is the same however records were
    /// batched. A revocation between the two drops the merged one as it would have dropped
    /// the first.
    ///
    /// `skips`, when `keepingHistory`: the records whose notification was merged into a later
    /// one's, noted `coalesced` at `now`.
    static func coalescedInBatch(
        _ operations: [OutboxOperation], coalesced: inout Int, skips: inout [RecordSkip], keepingHistory: Bool, now: Int64
    ) -> [OutboxOperation] {
        var first: [Int64: Int] = [:]
        var merged: [OutboxOperation] = []
        merged.reserveCapacity(operations.count)
        for operation in operations {
            if case .notify(let entry) = operation, entry.notification.coalesces {
                if let earlier = first[entry.subscriptionHandle] {
                    if keepingHistory, case .notify(let replaced) = merged[earlier], let seq = replaced.recordSeq, seq != entry.recordSeq {
                        skips.append(RecordSkip(app: replaced.app, seq: seq, subscription: replaced.subscriptionID, why: .coalesced, at: now))
                    }
                    merged[earlier] = operation
                    coalesced += 1
                    continue
                }
                first[entry.subscriptionHandle] = merged.count
            }
            merged.append(operation)
        }
        return merged
    }

    public func resetWatermark(source: String, lastSeq: Int64?) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE source_checkpoint SET last_seq = ? WHERE source = ?", arguments: [lastSeq, source])
            return db.changesCount > 0
        }
    }

    public func checkpoints() async throws -> [SourceCheckpoint] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM source_checkpoint ORDER BY source").map { row in
                SourceCheckpoint(
                    source: row["source"], lastSeq: row["last_seq"], position: row["position"], fileIdentity: row["file_identity"])
            }
        }
    }

    public func treeApplications() async throws -> [String] {
        try await read { db in
            try String.fetchAll(db, sql: "SELECT app FROM tree_head UNION SELECT DISTINCT app FROM tree_journal ORDER BY 1")
        }
    }

    public func tree(app: String) async throws -> StoredTree {
        try await read { db in
            var snapshot: [UInt8]?
            var through: Int64 = 0
            if let head = try Row.fetchOne(db, sql: "SELECT * FROM tree_head WHERE app = ?", arguments: [app]) {
                let generation: Int64 = head["generation"]
                let chunks: Int = head["chunks"]
                through = head["through_journal"]
                var bytes: [UInt8] = []
                let rows = try Row.fetchAll(
                    db, sql: "SELECT chunk, bytes FROM tree_snapshot WHERE app = ? AND generation = ? ORDER BY chunk",
                    arguments: [app, generation])
                guard rows.count == chunks, rows.enumerated().allSatisfy({ $0.offset == $0.element["chunk"] as Int }) else {
                    throw StoreError.corrupt("the snapshot of \(app) has \(rows.count) of its \(chunks) chunks")
                }
                for row in rows {
                    let chunk: [UInt8] = [UInt8](row["bytes"] as Data)
                    bytes += chunk
                }
                snapshot = bytes
            }
            let journal = try Row.fetchAll(
                db, sql: "SELECT id, records FROM tree_journal WHERE app = ? AND id > ? ORDER BY id", arguments: [app, through]
            ).map { row in (id: row["id"] as Int64, lines: [UInt8](row["records"] as Data)) }
            return StoredTree(snapshot: snapshot, snapshotThrough: through, journal: journal)
        }
    }

    public func saveSnapshot(app: String, tree: [UInt8], through: Int64) async throws {
        let generation = try await read { db in
            (try Int64.fetchOne(db, sql: "SELECT generation FROM tree_head WHERE app = ?", arguments: [app]) ?? 0) + 1
        }
        var chunks = 0
        var offset = 0
        repeat {
            let end = min(tree.count, offset + Self.snapshotChunkBytes)
            let chunk = Array(tree[offset..<end])
            let index = chunks
            try await write { db in
                try db.execute(
                    sql: "INSERT OR REPLACE INTO tree_snapshot (app, generation, chunk, bytes) VALUES (?, ?, ?, ?)",
                    arguments: [app, generation, index, Data(chunk)])
            }
            chunks += 1
            offset = end
        } while offset < tree.count
        let count = chunks
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO tree_head (app, generation, chunks, through_journal) VALUES (?, ?, ?, ?)
                    ON CONFLICT (app) DO UPDATE SET generation = excluded.generation, chunks = excluded.chunks,
                                                    through_journal = excluded.through_journal
                    """,
                arguments: [app, generation, count, through])
            try db.execute(
                sql: "DELETE FROM tree_snapshot WHERE app = ? AND (generation <> ? OR chunk >= ?)", arguments: [app, generation, count])
            try db.execute(sql: "DELETE FROM tree_journal WHERE app = ? AND id <= ?", arguments: [app, through])
        }
    }

    public func dueSubscriptions(now: Int64, limit: Int) async throws -> [Subscription] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT \(Self.subscriptionColumns) FROM subscription WHERE expires_at <= ? ORDER BY expires_at, handle LIMIT ?", arguments: [now, limit]
            ).map(Self.subscription)
        }
    }

    public func subscriptions(handles: [Int64]) async throws -> [Int64: Subscription] {
        if handles.isEmpty { return [:] }
        return try await read { db in
            var found: [Int64: Subscription] = [:]
            var start = 0
            while start < handles.count {
                let slice = Array(handles[start..<min(handles.count, start + 500)])
                let marks = Array(repeating: "?", count: slice.count).joined(separator: ",")
                let sql = "SELECT \(Self.subscriptionColumns) FROM subscription WHERE handle IN (\(marks))"
                // Small reads (an admission after each create) reuse their prepared statement;
                // the cache stays bounded to those 32 shapes.
                let statement = slice.count <= 32 ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
                for row in try Row.fetchAll(statement, arguments: StatementArguments(slice)) {
                    let subscription = try Self.subscription(row)
                    found[subscription.handle!] = subscription
                }
                start += slice.count
            }
            return found
        }
    }

    public func legacyRevocations(limit: Int) async throws -> [OutboxItem] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM outbox ORDER BY sequence LIMIT ?", arguments: [limit]).map { row in
                let document: String = row["subscription"]
                guard let reason = RevokeReason(rawValue: row["reason"]) else { throw StoreError.corrupt("unknown revoke reason") }
                return OutboxItem(
                    sequence: row["sequence"], subscription: try Subscription(document: try Self.parse(document, what: "an outbox subscription")),
                    reason: reason, createdAt: row["created_at"])
            }
        }
    }

    public func notifications(limit: Int) async throws -> [StoredNotification] {
        try await read { db in
            var found: [StoredNotification] = []
            try RawStatement(db, "SELECT \(Self.notificationColumns) FROM notification ORDER BY id LIMIT ?").query(
                { try $0.bind(Int64(limit)) }, row: { found.append(try Self.notification($0)) })
            return found
        }
    }

    public func outboxDepth() async throws -> (count: Int, oldest: Int64?) {
        // The count its triggers keep; the oldest by insertion (the primary key's first row).
        try await read { db in
            let count = try Int.fetchOne(db, sql: "SELECT value FROM tally WHERE name = 'notification'") ?? 0
            let oldest = try Int64.fetchOne(db, sql: "SELECT created_at FROM notification ORDER BY id LIMIT 1")
            return (max(0, count), oldest)
        }
    }

    /// The columns ``notification(_:)`` reads, by position, in this order.
    static let notificationColumns =
        "id, app, subscription_handle, subscription_id, kind, target, destination, event, payload, record_seq, created_at, next_attempt_at, attempts, first_attempt_at"

    /// A row of ``notificationColumns``, read through the C API (no GRDB `Row`: a claim's rows
    /// are on the delivery path).
    static func notification(_ row: RawStatement.Columns) throws -> StoredNotification {
        guard let kind = SubscriptionKind(rawValue: row.text(4)), let event = NotificationKind(rawValue: row.text(7)) else {
            throw StoreError.corrupt("a notification row has an unknown kind or event")
        }
        guard let attempts = Int(exactly: row.int64(12)) else { throw StoreError.corrupt("a notification row has a bad attempt count") }
        let entry = OutboxEntry(
            app: row.text(1), subscriptionHandle: row.int64(2), subscriptionID: row.text(3), kind: kind, target: row.optionalText(5),
            destination: row.optionalText(6), notification: event, payload: row.blob(8), recordSeq: row.optionalInt64(9))
        return StoredNotification(
            id: row.int64(0), entry: entry, createdAt: row.int64(10), nextAttemptAt: row.int64(11), attempts: attempts,
            firstAttemptAt: row.optionalInt64(13))
    }
}
