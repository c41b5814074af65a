import Foundation
import GRDB
import PushCore
import PushContracts

extension SQLiteStore: DeliveryStore {
    /// `AND NOT ((app = ? AND kind = ? AND coalesce(destination, '') = ?) OR …)` for the
    /// excluded senders, and its arguments.
    static func exclusion(_ excluding: Set<SenderKey>) -> (sql: String, arguments: [String]) {
        guard !excluding.isEmpty else { return ("", []) }
        let keys = excluding.sorted()
        let sql =
            "AND NOT ("
            + Array(repeating: "(n.app = ? AND n.kind = ? AND coalesce(n.destination, '') = ?)", count: keys.count).joined(separator: " OR ")
            + ")"
        return (sql, keys.flatMap { [$0.app, $0.kind.rawValue, $0.destination ?? ""] })
    }

    /// Statements of the delivery path whose text depends on the senders left out are prepared
    /// once per connection for up to this many (preparing the claim's statement cost more than
    /// running it, at every claim); rarer shapes are prepared each time, so the cache stays
    /// bounded.
    static let cachedExclusions = 4

    public func discardWaiting(for sender: SenderKey, createdBefore: Int64, now: Int64, keeping: Bool) async throws -> Int {
        try await write { db in
            let condition = """
                app = ? AND kind = ? AND coalesce(destination, '') = ? AND created_at < ?
                AND (claimed_until IS NULL OR claimed_until < ?)
                """
            let arguments: StatementArguments = [sender.app, sender.kind.rawValue, sender.destination ?? "", createdBefore, now]
            if keeping { try Self.keepDiscarded(db, where: condition, arguments: arguments, now: now) }
            try db.execute(sql: "DELETE FROM notification WHERE " + condition, arguments: arguments)
            return db.changesCount
        }
    }

    /// Copies the notifications `condition` selects into `discarded_notification`, where
    /// `recover` finds them (SPEC §13.3).
    static func keepDiscarded(_ db: Database, where condition: String, arguments: StatementArguments, now: Int64) throws {
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO discarded_notification (id, app, subscription_handle, subscription_id, kind, target, destination, event,
                                                               coalescable, payload, record_seq, created_at, discarded_at)
                SELECT id, app, subscription_handle, subscription_id, kind, target, destination, event, coalescable, payload, record_seq,
                       created_at, \(now)
                FROM notification WHERE \(condition)
                """,
            arguments: arguments)
    }

    public func claim(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>, capped: [SenderKey: Int]) async throws
        -> [StoredNotification]
    {
        guard limit > 0 else { return [] }
        return try await writeRelaxed { db in
            try Self.claim(db, now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding, capped: capped)
        }
    }

    /// The claim and, when it took fewer than `limit`, the next due time, in one transaction.
    public func claimDue(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>, capped: [SenderKey: Int]) async throws
        -> ClaimedBatch
    {
        try await writeRelaxed { db in
            try Self.claimDue(db, now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding, capped: capped)
        }
    }

    static func claimDue(
        _ db: Database, now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>, capped: [SenderKey: Int]
    ) throws -> ClaimedBatch {
        let claimed =
            limit > 0 ? try claim(db, now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding, capped: capped) : []
        guard claimed.count < limit else { return ClaimedBatch(notifications: claimed, nextDue: .notRead) }
        let exclusion = ClaimedBatch.nextDueExclusion(excluding, capped: capped, claimed: claimed)
        return ClaimedBatch(notifications: claimed, nextDue: try nextDue(db, excluding: exclusion).map { .at($0) } ?? ClaimedBatch.NextDue.none)
    }

    /// The claim: up to `limit` of the senders neither excluded nor capped, then of each capped
    /// sender up to its number (within what is left of `limit`), in one transaction.
    static func claim(
        _ db: Database, now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>, capped: [SenderKey: Int]
    ) throws -> [StoredNotification] {
        var claimed = try claim(db, now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding.union(capped.keys))
        for (key, most) in capped.sorted(by: { $0.key < $1.key }) where !excluding.contains(key) && claimed.count < limit {
            claimed += try claim(db, now: now, limit: min(most, limit - claimed.count), claimant: claimant, leaseUntil: leaseUntil, of: key)
        }
        return capped.isEmpty ? claimed : claimed.sorted { ($0.nextAttemptAt, $0.id) < ($1.nextAttemptAt, $1.id) }
    }

    /// The oldest notification of each subscription, due, not held by a live claim: those
    /// `condition` selects.
    static func claim(
        _ db: Database, now: Int64, limit: Int, claimant: String, leaseUntil: Int64, condition: (sql: String, arguments: [String]), cached: Bool
    ) throws -> [StoredNotification] {
        guard limit > 0 else { return [] }
        // The heads (each subscription's oldest: `head`, kept by triggers) due and unclaimed,
        // from their index; and those whose claim lapsed (a crashed holder's), from theirs.
        let sql = """
                UPDATE notification SET claimed_by = ?, claimed_until = ?
                WHERE id IN (
                    SELECT id FROM (
                        SELECT id, next_attempt_at FROM (
                            SELECT n.id, n.next_attempt_at FROM notification n
                            WHERE n.head = 1 AND n.claimed_until IS NULL AND n.next_attempt_at <= ?
                              \(condition.sql)
                            ORDER BY n.next_attempt_at, n.id
                            LIMIT ?)
                        UNION ALL
                        SELECT id, next_attempt_at FROM (
                            SELECT n.id, n.next_attempt_at FROM notification n
                            WHERE n.head = 1 AND n.claimed_until IS NOT NULL AND n.claimed_until < ? AND n.next_attempt_at <= ?
                              \(condition.sql)
                            ORDER BY n.claimed_until
                            LIMIT ?)
                        ORDER BY next_attempt_at, id
                        LIMIT ?))
                RETURNING \(Self.notificationColumns)
                """
        var claimed: [StoredNotification] = []
        claimed.reserveCapacity(limit)
        try RawStatement(db, sql, cached: cached).query({ binder in
            try binder.bind(claimant)
            try binder.bind(leaseUntil)
            try binder.bind(now)
            for argument in condition.arguments { try binder.bind(argument) }
            try binder.bind(Int64(limit))
            try binder.bind(now)
            try binder.bind(now)
            for argument in condition.arguments { try binder.bind(argument) }
            try binder.bind(Int64(limit))
            try binder.bind(Int64(limit))
        }, row: { claimed.append(try Self.notification($0)) })
        return claimed.sorted { ($0.nextAttemptAt, $0.id) < ($1.nextAttemptAt, $1.id) }
    }

    /// Claims the senders not in `excluding`.
    static func claim(_ db: Database, now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>) throws
        -> [StoredNotification]
    {
        try claim(
            db, now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, condition: Self.exclusion(excluding),
            cached: excluding.count <= Self.cachedExclusions)
    }

    /// Claims one sender's.
    static func claim(_ db: Database, now: Int64, limit: Int, claimant: String, leaseUntil: Int64, of key: SenderKey) throws -> [StoredNotification] {
        try claim(
            db, now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil,
            condition: ("AND n.app = ? AND n.kind = ? AND coalesce(n.destination, '') = ?", [key.app, key.kind.rawValue, key.destination ?? ""]),
            cached: true)
    }

    public func settle(_ settlements: [Settlement], attempts: [DeliveryAttempt], claimant: String, now: Int64) async throws -> SettleResult {
        guard !settlements.isEmpty || !attempts.isEmpty else { return SettleResult() }
        return try await writeRelaxed { db in try Self.settle(db, settlements, attempts: attempts, claimant: claimant, now: now) }
    }

    /// The settlements, then the claim and its next due time, in one transaction.
    public func settleAndClaimDue(
        _ settlements: [Settlement], attempts: [DeliveryAttempt], settledAt: Int64, claimant: String, now: Int64, limit: Int, leaseUntil: Int64,
        excluding: Set<SenderKey>, capped: [SenderKey: Int]
    ) async throws -> (SettleResult, Result<ClaimedBatch, any Error>) {
        try await writeRelaxed { db in
            let result =
                settlements.isEmpty && attempts.isEmpty
                ? SettleResult() : try Self.settle(db, settlements, attempts: attempts, claimant: claimant, now: settledAt)
            return (
                result,
                .success(
                    try Self.claimDue(db, now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding, capped: capped))
            )
        }
    }

    static func settle(_ db: Database, _ settlements: [Settlement], attempts: [DeliveryAttempt], claimant: String, now: Int64) throws
        -> SettleResult
    {
        var result = SettleResult()
        // With attempts, the history is on: they are written with their settlements.
        let keepsHistory = !attempts.isEmpty
        if keepsHistory { try insertAttempts(db, attempts) }
        let schedule = try RawStatement(
            db,
            """
            UPDATE notification SET next_attempt_at = ?, first_attempt_at = ?, attempts = ?, claimed_by = NULL, claimed_until = NULL
            WHERE id = ? AND claimed_by = ?
            """)
        let unclaim = try RawStatement(
            db, "UPDATE notification SET claimed_by = NULL, claimed_until = NULL WHERE id = ? AND claimed_by = ?")
        let dropSubscription = try RawStatement(db, "DELETE FROM notification WHERE subscription_handle = ?")
        let deleteSubscription = try RawStatement(db, "DELETE FROM subscription WHERE handle = ?")
        let insert = try RawStatement(db, Self.insertNotificationSQL + " VALUES (\(Self.notificationMarks))")
        let settled = try RawStatement(db, "DELETE FROM notification WHERE id = ? AND claimed_by = ?")
        func holds(_ id: Int64) throws -> Row? {
            try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT subscription_handle, coalescable, app, subscription_id, record_seq FROM notification WHERE id = ? AND claimed_by = ?"),
                arguments: [id, claimant])
        }
        for settlement in settlements {
            switch settlement {
            case .delivered(let id), .drop(let id):
                // One prepared statement stepped per notification: cheaper than preparing
                // an `IN (…)` of the batch's size each time.
                let deleted = try settled.run {
                    try $0.bind(id)
                    try $0.bind(claimant)
                }
                if deleted == 0 { result.lost += 1 }
            case .release(let id):
                let released = try unclaim.run {
                    try $0.bind(id)
                    try $0.bind(claimant)
                }
                if released == 0 { result.lost += 1 }
            case .postpone(let id, let until):
                let postponed = try db.cachedStatement(
                    sql: """
                        UPDATE notification SET next_attempt_at = max(next_attempt_at, ?), claimed_by = NULL, claimed_until = NULL
                        WHERE id = ? AND claimed_by = ?
                        """)
                try postponed.execute(arguments: [until, id, claimant])
                if db.changesCount == 0 { result.lost += 1 }
            case .retry(let id, let next, let first, let attempts):
                guard let row = try holds(id) else {
                    result.lost += 1
                    continue
                }
                let handle: Int64 = row["subscription_handle"]
                let coalescable: Bool = row["coalescable"]
                if coalescable,
                    let newer = try Int64.fetchOne(
                        db.cachedStatement(
                            sql: """
                                SELECT max(id) FROM notification
                                WHERE subscription_handle = ? AND coalescable = 1 AND claimed_until IS NULL AND id > ?
                                """), arguments: [handle, id])
                {
                    // A newer value waits: it takes this one's place in the schedule.
                    try db.cachedStatement(
                        sql: """
                            UPDATE notification SET next_attempt_at = max(next_attempt_at, ?), first_attempt_at = ?, attempts = ?
                            WHERE id = ?
                            """
                    ).execute(arguments: [next, first, attempts, newer])
                    try db.cachedStatement(sql: "DELETE FROM notification WHERE id = ?").execute(arguments: [id])
                    result.superseded += 1
                    if keepsHistory, let seq: Int64 = row["record_seq"] {
                        try insertSkips(db, [RecordSkip(app: row["app"], seq: seq, subscription: row["subscription_id"], why: .coalesced, at: now)])
                    }
                    continue
                }
                try schedule.run { binder in
                    try binder.bind(next)
                    try binder.bind(first)
                    try binder.bind(Int64(attempts))
                    try binder.bind(id)
                    try binder.bind(claimant)
                }
            case .discard(let id, let handle):
                guard try holds(id) != nil else {
                    result.lost += 1
                    continue
                }
                if keepsHistory { try keepDiscarded(db, where: "subscription_handle = ?", arguments: [handle], now: now) }
                let count = try dropSubscription.run { try $0.bind(handle) }
                result.discarded += count
                result.discardedWith[id] = count
            case .revoke(let id, let handle, let notification):
                guard try holds(id) != nil else {
                    result.lost += 1
                    continue
                }
                _ = try dropSubscription.run { try $0.bind(handle) }
                if try deleteSubscription.run({ try $0.bind(handle) }) > 0 {
                    result.revoked.append(handle)
                    if let entry = notification {
                        try insert.run(pinning: entry.payload) { try Self.bindNotification(&$0, entry, now: now) }
                    }
                }
            }
        }
        return result
    }

    public func nextDue(excluding: Set<SenderKey>) async throws -> Int64? {
        try await read { db in try Self.nextDue(db, excluding: excluding) }
    }

    static func nextDue(_ db: Database, excluding: Set<SenderKey>) throws -> Int64? {
        let exclusion = Self.exclusion(excluding)
        let sql = """
            SELECT min(n.next_attempt_at) FROM notification n
            WHERE n.head = 1 AND n.claimed_until IS NULL \(exclusion.sql)
            """
        let statement = excluding.count <= cachedExclusions ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
        return try Int64.fetchOne(statement, arguments: StatementArguments(exclusion.arguments))
    }

    @discardableResult
    public func releaseClaims(claimant: String, keeping: Set<Int64>) async throws -> Int {
        try await write { db in
            let held = try Int64.fetchAll(db, sql: "SELECT id FROM notification WHERE claimed_by = ?", arguments: [claimant])
            let released = held.filter { !keeping.contains($0) }
            for id in released {
                try db.execute(sql: "UPDATE notification SET claimed_by = NULL, claimed_until = NULL WHERE id = ? AND claimed_by = ?", arguments: [id, claimant])
            }
            return released.count
        }
    }

    public func releaseClaims(claimant: String?) async throws -> Int {
        try await write { db in
            if let claimant {
                try db.execute(sql: "UPDATE notification SET claimed_by = NULL, claimed_until = NULL WHERE claimed_by = ?", arguments: [claimant])
            } else {
                try db.execute(sql: "UPDATE notification SET claimed_by = NULL, claimed_until = NULL WHERE claimed_by IS NOT NULL")
            }
            return db.changesCount
        }
    }

    /// Writes attempts into the history.
    static func insertAttempts(_ db: Database, _ attempts: [DeliveryAttempt]) throws {
        let insert = try RawStatement(
            db,
            """
            INSERT INTO delivery_attempt (notification, subscription, app, seq, provider, destination, attempt, at, status, reason, latency_ms,
                                          outcome, next_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        for attempt in attempts {
            _ = try insert.run { binder in
                try binder.bind(attempt.notification)
                try binder.bind(attempt.subscription)
                try binder.bind(attempt.app)
                try binder.bind(attempt.seq)
                try binder.bind(attempt.provider)
                try binder.bind(attempt.destination)
                try binder.bind(Int64(attempt.attempt))
                try binder.bind(attempt.at)
                try binder.bind(attempt.status.map(Int64.init))
                try binder.bind(attempt.reason)
                try binder.bind(attempt.latencyMs)
                try binder.bind(attempt.outcome.rawValue)
                try binder.bind(attempt.nextAt)
            }
        }
    }

    /// Writes skips into the history.
    /// Rows of `record_skip` written by one statement: a heavily coalescing stream notes about
    /// one skip per record, and a statement per row (with its `sqlite_sequence` update) cost
    /// more than the rows.
    static let skipsPerStatement = 64

    static func insertSkips(_ db: Database, _ skips: [RecordSkip]) throws {
        guard !skips.isEmpty else { return }
        func statement(rows: Int) throws -> RawStatement {
            try RawStatement(
                db, "INSERT INTO record_skip (app, seq, subscription, why, at) VALUES " + Array(repeating: "(?, ?, ?, ?, ?)", count: rows).joined(separator: ", "))
        }
        let full = skips.count >= skipsPerStatement ? try statement(rows: skipsPerStatement) : nil
        var start = skips.startIndex
        while start < skips.endIndex {
            let end = min(start + skipsPerStatement, skips.endIndex)
            let insert = end - start == skipsPerStatement ? full! : try statement(rows: end - start)
            _ = try insert.run { binder in
                for skip in skips[start..<end] {
                    try binder.bind(skip.app)
                    try binder.bind(skip.seq)
                    try binder.bind(skip.subscription)
                    try binder.bind(skip.why.rawValue)
                    try binder.bind(skip.at)
                }
            }
            start = end
        }
    }
}
