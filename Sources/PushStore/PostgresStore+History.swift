import PostgresNIO
import PushContracts
import PushCore

extension PostgresStore: HistoryStore {
    static let attemptColumns = """
        id, notification, subscription, app, seq, provider, destination, attempt, at, status, reason, latency_ms, outcome, next_at
        """

    static func attempt(_ row: PostgresRow) throws -> (id: Int64, attempt: DeliveryAttempt) {
        let (id, notification, subscription, app, seq, provider, destination, number, at, status, reason, latency, outcomeText, next) = try row.decode(
            (Int64, Int64, String, String, Int64?, String, String?, Int64, Int64, Int32?, String?, Int64?, String, Int64?).self)
        guard let outcome = DeliveryAttempt.Outcome(rawValue: outcomeText) else { throw StoreError.corrupt("a delivery attempt has an unknown outcome") }
        return (
            id,
            DeliveryAttempt(
                notification: notification, subscription: subscription, app: app, seq: seq, provider: provider, destination: destination,
                attempt: Int(clamping: number), at: at, status: status.map(Int.init), reason: reason, latencyMs: latency, outcome: outcome, nextAt: next)
        )
    }

    public func attempts(app: String, subscription: String, cursor: Int64?, limit: Int) async throws -> HistoryPage<DeliveryAttempt> {
        let limit = max(1, limit)
        var rows: [(id: Int64, attempt: DeliveryAttempt)] = []
        try await run { session in
            for row in try await session.query(
                """
                SELECT \(unescaped: Self.attemptColumns) FROM delivery_attempt
                WHERE subscription = \(subscription) AND app = \(app) AND id < \(cursor ?? Int64.max) ORDER BY id DESC LIMIT \(Int64(limit + 1))
                """
            ).collect() { rows.append(try Self.attempt(row)) }
        }
        return HistoryPage(items: rows.prefix(limit).map(\.attempt), nextCursor: rows.count > limit ? rows[limit - 1].id : nil)
    }

    public func fate(app: String, seq: Int64) async throws -> RecordFate {
        var notifications: [Int64: RecordNotification] = [:]
        var skips: [RecordSkip] = []
        try await run { session in
            for (table, state) in [("notification", RecordNotification.State.waiting), ("discarded_notification", .discarded)] {
                for try await (id, subscription, event) in try await session.query(
                    "SELECT id, subscription_id, event FROM \(unescaped: table) WHERE app = \(app) AND record_seq = \(seq)"
                ).decode((Int64, String, String).self) {
                    notifications[id] = RecordNotification(notification: id, subscription: subscription, kind: event, state: state, attempts: [])
                }
            }
            for row in try await session.query(
                "SELECT \(unescaped: Self.attemptColumns) FROM delivery_attempt WHERE app = \(app) AND seq = \(seq) ORDER BY id DESC"
            ).collect() {
                let attempt = try Self.attempt(row).attempt
                notifications[attempt.notification, default: RecordNotification(
                    notification: attempt.notification, subscription: attempt.subscription, kind: nil, state: .settled, attempts: [])
                ].attempts.append(attempt)
            }
            for try await (subscription, whyText, at) in try await session.query(
                "SELECT subscription, why, at FROM record_skip WHERE app = \(app) AND seq = \(seq) ORDER BY id"
            ).decode((String, String, Int64).self) {
                guard let why = RecordSkip.Why(rawValue: whyText) else { throw StoreError.corrupt("a record skip has an unknown reason") }
                skips.append(RecordSkip(app: app, seq: seq, subscription: subscription, why: why, at: at))
            }
        }
        return RecordFate(notifications: notifications.values.sorted { $0.notification < $1.notification }, nothing: skips)
    }

    public func subscriptions(matching query: SubscriptionQuery, cursor: Int64?, limit: Int) async throws -> HistoryPage<SubscriptionFound> {
        let limit = max(1, limit)
        var found: [SubscriptionFound] = []
        var handles: [Int64] = []
        try await run { session in
            let rows = try await session.query(
                """
                SELECT \(unescaped: Self.columns) FROM subscription
                WHERE handle > \(cursor ?? 0) AND (\(query.app)::text IS NULL OR app = \(query.app)) AND (\(query.uid)::text IS NULL OR uid = \(query.uid))
                  AND (\(query.path)::text IS NULL OR path = \(query.path)) AND (\(query.token)::text IS NULL OR context = \(query.token))
                ORDER BY handle LIMIT \(Int64(limit + 1))
                """
            ).collect()
            for row in rows {
                let subscription = try Self.subscription(row)
                handles.append(subscription.handle ?? 0)
                guard found.count < limit else { continue }
                var last: DeliveryAttempt?
                for row in try await session.query(
                    "SELECT \(unescaped: Self.attemptColumns) FROM delivery_attempt WHERE subscription = \(subscription.id) ORDER BY id DESC LIMIT 1"
                ).collect() { last = try Self.attempt(row).attempt }
                found.append(SubscriptionFound(subscription: subscription, lastAttempt: last))
            }
        }
        return HistoryPage(items: found, nextCursor: handles.count > limit ? handles[limit - 1] : nil)
    }

    public func recover(_ filter: RecoveryFilter, now: Int64) async throws -> Int {
        try await transaction(writerLock: false) { connection in
            let kind = filter.kind?.rawValue
            return try await connection.query(
                """
                WITH taken AS (
                    DELETE FROM discarded_notification d
                    WHERE d.app = \(filter.app) AND d.discarded_at >= \(filter.since) AND (\(kind)::text IS NULL OR d.kind = \(kind))
                      AND (\(filter.destination)::text IS NULL OR d.destination = \(filter.destination))
                      AND EXISTS (SELECT 1 FROM subscription s WHERE s.handle = d.subscription_handle)
                    RETURNING d.*)
                INSERT INTO notification (app, subscription_handle, subscription_id, kind, target, destination, event, coalescable, payload,
                                          record_seq, created_at, next_attempt_at)
                SELECT app, subscription_handle, subscription_id, kind, target, destination, event, coalescable, payload, record_seq,
                       \(now), \(now)
                FROM taken ORDER BY id
                RETURNING id
                """, logger: self.logger
            ).collect().count
        }
    }

    @discardableResult
    public func pruneHistory(now: Int64, limits: HistoryLimits) async throws -> Int {
        var total = 0
        let chunk = Int64(SQLiteStore.pruneChunk)
        for (table, time) in [("delivery_attempt", "at"), ("record_skip", "at"), ("discarded_notification", "discarded_at")] {
            while true {
                var deleted = 0
                try await run { session in
                    if !limits.isOn {
                        deleted = try await session.query(
                            "DELETE FROM \(unescaped: table) WHERE id IN (SELECT id FROM \(unescaped: table) ORDER BY id LIMIT \(chunk)) RETURNING id"
                        ).collect().count
                        return
                    }
                    let cutoff = now.saturatingSubtracting(limits.maxAge)
                    deleted = try await session.query(
                        """
                        DELETE FROM \(unescaped: table)
                        WHERE id IN (SELECT id FROM \(unescaped: table) WHERE \(unescaped: time) < \(cutoff) ORDER BY id LIMIT \(chunk)) RETURNING id
                        """
                    ).collect().count
                    var newest: Int64?
                    for try await value in try await session.query("SELECT max(id) FROM \(unescaped: table)").decode(Int64?.self) { newest = value }
                    if let newest {
                        let keepFrom = newest.saturatingSubtracting(Int64(limits.maxRows))
                        deleted += try await session.query(
                            """
                            DELETE FROM \(unescaped: table)
                            WHERE id IN (SELECT id FROM \(unescaped: table) WHERE id <= \(keepFrom) ORDER BY id LIMIT \(chunk)) RETURNING id
                            """
                        ).collect().count
                    }
                }
                total += deleted
                if deleted < Int(chunk) { break }
            }
        }
        return total
    }
}
