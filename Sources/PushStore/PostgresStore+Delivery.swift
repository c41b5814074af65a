import Foundation
import PostgresNIO
import PushCore
import PushContracts

extension PostgresStore: DeliveryStore {
    public func discardWaiting(for sender: SenderKey, createdBefore: Int64, now: Int64, keeping: Bool) async throws -> Int {
        var count = 0
        try await run { client in
            let rows = try await client.query(
                """
                WITH gone AS (
                DELETE FROM notification
                WHERE app = \(sender.app) AND kind = \(sender.kind.rawValue) AND coalesce(destination, '') = \(sender.destination ?? "")
                  AND created_at < \(createdBefore) AND (claimed_until IS NULL OR claimed_until < \(unescaped: Self.databaseMilliseconds))
                RETURNING \(unescaped: Self.discardedColumns)),
                kept AS (
                INSERT INTO discarded_notification (\(unescaped: Self.discardedColumns), discarded_at)
                SELECT \(unescaped: Self.discardedColumns), \(now) FROM gone WHERE \(keeping)
                ON CONFLICT (id) DO NOTHING)
                SELECT id FROM gone
                """, logger: self.logger)
            for try await _ in rows { count += 1 }
        }
        return count
    }

    /// A claim is a lease between instances, so it is timed by the database's clock, as the
    /// applications' leases are: it lasts `leaseUntil - now` from the database's now, and
    /// another's claim has ended when the database's clock says so. (Before issue 33 both ends
    /// were the caller's clock: an instance whose clock was ahead took the others' claims of
    /// sends in flight, and sent them again; one behind lost its own.) `now` still says what
    /// is due: `next_attempt_at` is written by the instances' clocks.
    public func claim(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>, capped: [SenderKey: Int]) async throws
        -> [StoredNotification]
    {
        guard limit > 0 else { return [] }
        let lease = max(0, leaseUntil.saturatingSubtracting(now))
        let keys = excluding.union(capped.keys).sorted()
        let paced = capped.filter { !excluding.contains($0.key) }.sorted { $0.key < $1.key }
        let returned = Self.notificationColumns.split(separator: ",").map { "notification." + $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .joined(separator: ", ")
        // `free`: the senders neither left out nor capped; `paced`: of each capped sender up to
        // its number; together, the earliest due up to `limit` (the rows locked beyond it are
        // let go at the statement's end).
        let query: PostgresQuery = """
            WITH free AS (
                SELECT n.id, n.next_attempt_at FROM notification n
                WHERE n.next_attempt_at <= \(now) AND (n.claimed_until IS NULL OR n.claimed_until < \(unescaped: Self.databaseMilliseconds))
                  AND (n.app, n.kind, coalesce(n.destination, '')) NOT IN (SELECT * FROM unnest(\(keys.map(\.app))::text[], \(keys.map(\.kind.rawValue))::text[], \(keys.map { $0.destination ?? "" })::text[]))
                  AND NOT EXISTS (SELECT 1 FROM notification e WHERE e.subscription_handle = n.subscription_handle AND e.id < n.id)
                ORDER BY n.next_attempt_at, n.id
                LIMIT \(Int64(limit))
                FOR UPDATE SKIP LOCKED),
            paced AS (
                SELECT c.id, c.next_attempt_at
                FROM unnest(\(paced.map(\.key.app))::text[], \(paced.map(\.key.kind.rawValue))::text[], \(paced.map { $0.key.destination ?? "" })::text[],
                            \(paced.map { Int64(min($0.value, limit)) })::bigint[]) AS k(app, kind, destination, most)
                CROSS JOIN LATERAL (
                    SELECT n.id, n.next_attempt_at FROM notification n
                    WHERE n.app = k.app AND n.kind = k.kind AND coalesce(n.destination, '') = k.destination
                      AND n.next_attempt_at <= \(now) AND (n.claimed_until IS NULL OR n.claimed_until < \(unescaped: Self.databaseMilliseconds))
                      AND NOT EXISTS (SELECT 1 FROM notification e WHERE e.subscription_handle = n.subscription_handle AND e.id < n.id)
                    ORDER BY n.next_attempt_at, n.id
                    LIMIT k.most
                    FOR UPDATE SKIP LOCKED) c),
            candidate AS (
                SELECT id FROM (SELECT * FROM free UNION ALL SELECT * FROM paced) taken ORDER BY next_attempt_at, id LIMIT \(Int64(limit)))
            UPDATE notification SET claimed_by = \(claimant), claimed_until = \(unescaped: Self.databaseMilliseconds) + \(lease)
            FROM candidate WHERE notification.id = candidate.id
            RETURNING \(unescaped: returned)
            """
        var claimed: [StoredNotification] = []
        // Rows another instance holds locked are skipped, not waited for: instances claim side
        // by side. The oldest of a subscription locked by another is still older than the
        // rest, so they stay unclaimed (order per subscription across instances).
        try await run { session in
            for row in try await session.query(query).collect() { claimed.append(try Self.notification(row)) }
        }
        return claimed.sorted { ($0.nextAttemptAt, $0.id) < ($1.nextAttemptAt, $1.id) }
    }

    public func settle(_ settlements: [Settlement], attempts: [DeliveryAttempt], claimant: String, now: Int64) async throws -> SettleResult {
        guard !settlements.isEmpty || !attempts.isEmpty else { return SettleResult() }
        let revokes = settlements.contains { if case .revoke = $0 { true } else { false } }
        // With attempts, the history is on: they are written with their settlements.
        let keepsHistory = !attempts.isEmpty
        return try await transaction(writerLock: revokes) { connection in
            var result = SettleResult()
            try await Self.insertAttempts(attempts, on: connection, logger: self.logger)
            func holds(_ id: Int64) async throws -> (handle: Int64, coalescable: Bool, app: String, subscription: String, seq: Int64?)? {
                var found: (Int64, Bool, String, String, Int64?)?
                for try await row in try await connection.query(
                    """
                    SELECT subscription_handle, coalescable, app, subscription_id, record_seq FROM notification
                    WHERE id = \(id) AND claimed_by = \(claimant) FOR UPDATE
                    """,
                    logger: self.logger
                ).decode((Int64, Bool, String, String, Int64?).self) { found = row }
                return found
            }
            let done = settlements.compactMap { settlement -> Int64? in
                switch settlement {
                case .delivered(let id), .drop(let id): id
                default: nil
                }
            }
            if !done.isEmpty {
                let deleted = try await connection.query(
                    "DELETE FROM notification WHERE claimed_by = \(claimant) AND id = ANY(\(done)) RETURNING id", logger: self.logger
                ).collect().count
                result.lost += done.count - deleted
            }
            // Released and postponed notifications go back in one statement (a paced sender's
            // overflow is hundreds of them a claim: one round trip each made the other
            // instances wait for these rows' locks).
            var backIDs: [Int64] = []
            var backUntil: [Int64] = []
            for settlement in settlements {
                switch settlement {
                case .release(let id):
                    backIDs.append(id)
                    backUntil.append(0)
                case .postpone(let id, let until):
                    backIDs.append(id)
                    backUntil.append(until)
                default:
                    continue
                }
            }
            if !backIDs.isEmpty {
                let back = try await connection.query(
                    """
                    UPDATE notification SET next_attempt_at = greatest(notification.next_attempt_at, back.due), claimed_by = NULL, claimed_until = NULL
                    FROM unnest(\(backIDs)::bigint[], \(backUntil)::bigint[]) AS back(id, due)
                    WHERE notification.id = back.id AND notification.claimed_by = \(claimant) RETURNING notification.id
                    """, logger: self.logger
                ).collect().count
                result.lost += backIDs.count - back
            }
            for settlement in settlements {
                switch settlement {
                case .delivered, .drop, .release, .postpone:
                    continue
                case .retry(let id, let next, let first, let attempts):
                    guard let held = try await holds(id) else {
                        result.lost += 1
                        continue
                    }
                    if held.coalescable {
                        var newer: Int64?
                        for try await value in try await connection.query(
                            """
                            SELECT max(id) FROM notification
                            WHERE subscription_handle = \(held.handle) AND coalescable AND claimed_until IS NULL AND id > \(id)
                            """, logger: self.logger
                        ).decode(Int64?.self) { newer = value }
                        if let newer {
                            // A newer value waits: it takes this one's place in the schedule.
                            try await connection.query(
                                """
                                UPDATE notification SET next_attempt_at = greatest(next_attempt_at, \(next)), first_attempt_at = \(first),
                                    attempts = \(Int64(attempts))
                                WHERE id = \(newer)
                                """, logger: self.logger)
                            try await connection.query("DELETE FROM notification WHERE id = \(id)", logger: self.logger)
                            result.superseded += 1
                            if keepsHistory, let seq = held.seq {
                                try await Self.insertSkips(
                                    [RecordSkip(app: held.app, seq: seq, subscription: held.subscription, why: .coalesced, at: now)], on: connection,
                                    logger: self.logger)
                            }
                            continue
                        }
                    }
                    try await connection.query(
                        """
                        UPDATE notification SET next_attempt_at = \(next), first_attempt_at = \(first), attempts = \(Int64(attempts)),
                            claimed_by = NULL, claimed_until = NULL
                        WHERE id = \(id) AND claimed_by = \(claimant)
                        """, logger: self.logger)
                case .discard(let id, let handle):
                    guard try await holds(id) != nil else {
                        result.lost += 1
                        continue
                    }
                    if keepsHistory { try await Self.keepDiscarded(subscription: handle, now: now, on: connection, logger: self.logger) }
                    let count =
                        try await connection.query(
                            "DELETE FROM notification WHERE subscription_handle = \(handle) RETURNING id", logger: self.logger
                        ).collect().count
                    result.discarded += count
                    result.discardedWith[id] = count
                case .revoke(let id, let handle, let notification):
                    guard try await holds(id) != nil else {
                        result.lost += 1
                        continue
                    }
                    try await connection.query("DELETE FROM notification WHERE subscription_handle = \(handle)", logger: self.logger)
                    let deleted = try await connection.query(
                        "DELETE FROM subscription WHERE handle = \(handle) RETURNING handle", logger: self.logger
                    ).collect().count
                    if deleted > 0 {
                        result.revoked.append(handle)
                        if let entry = notification {
                            _ = try await connection.query(Self.insertNotification(entry, now: now), logger: self.logger)
                                .collect()
                        }
                    }
                }
            }
            return result
        }
    }

    public func nextDue(excluding: Set<SenderKey>) async throws -> Int64? {
        let keys = excluding.sorted()
        let query: PostgresQuery = """
            SELECT min(n.next_attempt_at) FROM notification n
            WHERE n.claimed_until IS NULL
              AND (n.app, n.kind, coalesce(n.destination, '')) NOT IN (SELECT * FROM unnest(\(keys.map(\.app))::text[], \(keys.map(\.kind.rawValue))::text[], \(keys.map { $0.destination ?? "" })::text[]))
              AND NOT EXISTS (SELECT 1 FROM notification e WHERE e.subscription_handle = n.subscription_handle AND e.id < n.id)
            """
        var due: Int64?
        try await run { session in
            for try await value in try await session.query(query).decode(Int64?.self) { due = value }
        }
        return due
    }

    @discardableResult
    public func releaseClaims(claimant: String, keeping: Set<Int64>) async throws -> Int {
        var released = 0
        let kept = Array(keeping)
        try await run { session in
            released = try await session.query(
                "UPDATE notification SET claimed_by = NULL, claimed_until = NULL WHERE claimed_by = \(claimant) AND NOT (id = ANY(\(kept))) RETURNING id"
            ).collect().count
        }
        return released
    }

    public func releaseClaims(claimant: String?) async throws -> Int {
        var released = 0
        try await run { session in
            if let claimant {
                released = try await session.query(
                    "UPDATE notification SET claimed_by = NULL, claimed_until = NULL WHERE claimed_by = \(claimant) RETURNING id"
                ).collect().count
            } else {
                released = try await session.query(
                    "UPDATE notification SET claimed_by = NULL, claimed_until = NULL WHERE claimed_by IS NOT NULL RETURNING id"
                ).collect().count
            }
        }
        return released
    }
}
