import GRDB
import PushContracts
import PushCore

extension SQLiteStore: HistoryStore {
    static let attemptColumns = """
        id, notification, subscription, app, seq, provider, destination, attempt, at, status, reason, latency_ms, outcome, next_at
        """

    static func attempt(_ row: Row) throws -> DeliveryAttempt {
        guard let outcome = DeliveryAttempt.Outcome(rawValue: row["outcome"]) else { throw StoreError.corrupt("a delivery attempt has an unknown outcome") }
        let attempt: Int64 = row["attempt"]
        let status: Int64? = row["status"]
        return DeliveryAttempt(
            notification: row["notification"], subscription: row["subscription"], app: row["app"], seq: row["seq"], provider: row["provider"],
            destination: row["destination"], attempt: Int(clamping: attempt), at: row["at"], status: status.map { Int(clamping: $0) },
            reason: row["reason"], latencyMs: row["latency_ms"], outcome: outcome, nextAt: row["next_at"])
    }

    /// An attempt's era (SQLite v12): its id divided by 2,048, the first column of the index by
    /// subscription, spelled here exactly as the index spells it (`id >> 11`) so that SQLite
    /// uses it.
    static let attemptEraShift: Int64 = 11
    static let attemptEra = "id >> \(attemptEraShift)"

    /// The eras that hold attempts with an id below `below` (all when `nil`), newest first;
    /// `nil` when there are none.
    static func attemptEras(_ db: Database, below: Int64?) throws -> StrideThrough<Int64>? {
        guard let newest = try Int64.fetchOne(db, sql: "SELECT max(id) FROM delivery_attempt"),
            let oldest = try Int64.fetchOne(db, sql: "SELECT min(id) FROM delivery_attempt")
        else { return nil }
        let top = min(newest, (below ?? Int64.max).saturatingSubtracting(1))
        guard top >= oldest else { return nil }
        return stride(from: top >> attemptEraShift, through: oldest >> attemptEraShift, by: -1)
    }

    /// One era's attempts of a subscription in an application, below an id, newest first.
    static let attemptsInEraSQL = """
        SELECT \(attemptColumns) FROM delivery_attempt
        WHERE \(attemptEra) = ? AND subscription = ? AND app = ? AND id < ? ORDER BY id DESC LIMIT ?
        """

    /// The newest attempt of each of `count` subscriptions within one era (the era, then the
    /// subscriptions).
    static func lastAttemptsInEraSQL(count: Int) -> String {
        """
        SELECT \(attemptColumns) FROM delivery_attempt
        WHERE id IN (SELECT max(id) FROM delivery_attempt
                     WHERE \(attemptEra) = ? AND subscription IN (\(Array(repeating: "?", count: count).joined(separator: ", ")))
                     GROUP BY subscription)
        """
    }

    /// A subscription's attempts, newest first, era by era from the cursor's. The cost grows
    /// with the eras read: those between the cursor and the page's last attempt, all of them
    /// for a subscription with none (docs/decisions.md).
    public func attempts(app: String, subscription: String, cursor: Int64?, limit: Int) async throws -> HistoryPage<DeliveryAttempt> {
        let limit = max(1, limit)
        return try await read { db in
            var rows: [Row] = []
            if let eras = try Self.attemptEras(db, below: cursor) {
                let statement = try db.cachedStatement(sql: Self.attemptsInEraSQL)
                for era in eras {
                    rows += try Row.fetchAll(statement, arguments: [era, subscription, app, cursor ?? Int64.max, limit + 1 - rows.count])
                    if rows.count > limit { break }
                }
            }
            let items = try rows.prefix(limit).map(Self.attempt)
            return HistoryPage(items: items, nextCursor: rows.count > limit ? rows[limit - 1]["id"] : nil)
        }
    }

    /// The newest attempt under each of `subscriptions` (whichever application wrote it), found
    /// era by era, newest first, until each has one or the eras run out. The list is a page of
    /// the operator's search (at most `OperationsAPI.maximumLimit`, 500).
    static func lastAttempts(_ db: Database, subscriptions: [String]) throws -> [String: DeliveryAttempt] {
        var found: [String: DeliveryAttempt] = [:]
        var pending = Array(Set(subscriptions)).sorted()
        guard !pending.isEmpty, let eras = try attemptEras(db, below: nil) else { return found }
        // One statement per number of subscriptions still searched for, prepared once here.
        var statements: [Int: Statement] = [:]
        for era in eras {
            let statement: Statement
            if let prepared = statements[pending.count] {
                statement = prepared
            } else {
                statement = try db.makeStatement(sql: lastAttemptsInEraSQL(count: pending.count))
                statements[pending.count] = statement
            }
            let rows = try Row.fetchAll(statement, arguments: StatementArguments([era] + pending as [any DatabaseValueConvertible]))
            for row in rows {
                let attempt = try attempt(row)
                found[attempt.subscription] = attempt
            }
            if !rows.isEmpty {
                pending.removeAll { found[$0] != nil }
                if pending.isEmpty { break }
            }
        }
        return found
    }

    public func fate(app: String, seq: Int64) async throws -> RecordFate {
        try await read { db in
            var notifications: [Int64: RecordNotification] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT id, subscription_id, event FROM notification WHERE app = ? AND record_seq = ?", arguments: [app, seq]) {
                notifications[row["id"]] = RecordNotification(notification: row["id"], subscription: row["subscription_id"], kind: row["event"], state: .waiting, attempts: [])
            }
            for row in try Row.fetchAll(
                db, sql: "SELECT id, subscription_id, event FROM discarded_notification WHERE app = ? AND record_seq = ?", arguments: [app, seq])
            {
                notifications[row["id"]] = RecordNotification(
                    notification: row["id"], subscription: row["subscription_id"], kind: row["event"], state: .discarded, attempts: [])
            }
            for row in try Row.fetchAll(
                db, sql: "SELECT \(Self.attemptColumns) FROM delivery_attempt WHERE app = ? AND seq = ? ORDER BY id DESC", arguments: [app, seq])
            {
                let attempt = try Self.attempt(row)
                notifications[attempt.notification, default: RecordNotification(
                    notification: attempt.notification, subscription: attempt.subscription, kind: nil, state: .settled, attempts: [])
                ].attempts.append(attempt)
            }
            var skips = try Row.fetchAll(db, sql: "SELECT app, seq, subscription, why, at FROM record_skip WHERE app = ? AND seq = ? ORDER BY id", arguments: [app, seq])
                .map { row -> RecordSkip in
                    guard let why = RecordSkip.Why(rawValue: row["why"]) else { throw StoreError.corrupt("a record skip has an unknown reason") }
                    return RecordSkip(app: row["app"], seq: row["seq"], subscription: row["subscription"], why: why, at: row["at"])
                }
            // Coalesced across batches: the seq in a notification's list, waiting or moved with it
            // (SQLite v9). The lists are decimal text, so the seq is looked for as `,seq,`.
            let needle = ",\(seq),"
            let coalesced = try Row.fetchAll(
                db,
                sql: """
                    SELECT subscription_id, coalesced_at FROM notification
                    WHERE app = ? AND coalesced IS NOT NULL AND coalesced_first <= ? AND coalesced_last >= ? AND instr(',' || coalesced || ',', ?) > 0
                    UNION ALL
                    SELECT subscription, at FROM record_coalesced
                    WHERE app = ? AND first_seq BETWEEN ? AND ? AND last_seq >= ? AND instr(',' || seqs || ',', ?) > 0
                    """,
                arguments: [app, seq, seq, needle, app, seq.saturatingSubtracting(Self.coalescedSpan), seq, seq, needle])
            skips += coalesced.map { RecordSkip(app: app, seq: seq, subscription: $0[0], why: .coalesced, at: $0[1]) }
            return RecordFate(notifications: notifications.values.sorted { $0.notification < $1.notification }, nothing: skips)
        }
    }

    public func subscriptions(matching query: SubscriptionQuery, cursor: Int64?, limit: Int) async throws -> HistoryPage<SubscriptionFound> {
        let limit = max(1, limit)
        return try await read { db in
            var conditions = ["handle > ?"]
            var arguments: StatementArguments = [cursor ?? 0]
            if let app = query.app {
                conditions.append("app = ?")
                _ = arguments.append(contentsOf: [app])
            }
            if let uid = query.uid {
                conditions.append("uid = ?")
                _ = arguments.append(contentsOf: [uid])
            }
            if let path = query.path {
                conditions.append("path = ?")
                _ = arguments.append(contentsOf: [path])
            }
            if let token = query.token {
                conditions.append("context = ?")
                _ = arguments.append(contentsOf: [token])
            }
            _ = arguments.append(contentsOf: [limit + 1])
            let rows = try Row.fetchAll(
                db, sql: "SELECT \(Self.subscriptionColumns) FROM subscription WHERE \(conditions.joined(separator: " AND ")) ORDER BY handle LIMIT ?", arguments: arguments)
            let subscriptions = try rows.prefix(limit).map(Self.subscription)
            let last = try Self.lastAttempts(db, subscriptions: subscriptions.map(\.id))
            let found = subscriptions.map { SubscriptionFound(subscription: $0, lastAttempt: last[$0.id]) }
            return HistoryPage(items: found, nextCursor: rows.count > limit ? rows[limit - 1]["handle"] : nil)
        }
    }

    public func recover(_ filter: RecoveryFilter, now: Int64) async throws -> Int {
        try await write { db in
            let selection = """
                FROM discarded_notification d
                WHERE d.app = ? AND d.discarded_at >= ? AND (? IS NULL OR d.kind = ?) AND (? IS NULL OR d.destination = ?)
                  AND EXISTS (SELECT 1 FROM subscription s WHERE s.handle = d.subscription_handle)
                """
            let kind = filter.kind?.rawValue
            let arguments: StatementArguments = [filter.app, filter.since, kind, kind, filter.destination, filter.destination]
            let ids = try Int64.fetchAll(db, sql: "SELECT d.id " + selection + " ORDER BY d.id", arguments: arguments)
            guard !ids.isEmpty else { return 0 }
            for id in ids {
                try db.execute(
                    sql: """
                        INSERT INTO notification (app, subscription_handle, subscription_id, kind, target, destination, event, coalescable,
                                                  payload, record_seq, created_at, next_attempt_at)
                        SELECT app, subscription_handle, subscription_id, kind, target, destination, event, coalescable, payload, record_seq, ?, ?
                        FROM discarded_notification WHERE id = ?
                        """, arguments: [now, now, id])
                try db.execute(sql: "DELETE FROM discarded_notification WHERE id = ?", arguments: [id])
            }
            return ids.count
        }
    }

    /// Rows deleted per transaction while pruning: the writer is never held long.
    static let pruneChunk = 5_000

    @discardableResult
    public func pruneHistory(now: Int64, limits: HistoryLimits) async throws -> Int {
        var total = 0
        for (table, time) in [
            ("delivery_attempt", "at"), ("record_skip", "at"), ("record_coalesced", "at"), ("discarded_notification", "discarded_at"),
        ] {
            while true {
                let deleted = try await write { db -> Int in
                    if !limits.isOn {
                        try db.execute(sql: "DELETE FROM \(table) WHERE id IN (SELECT id FROM \(table) ORDER BY id LIMIT \(Self.pruneChunk))")
                        return db.changesCount
                    }
                    let cutoff = now.saturatingSubtracting(limits.maxAge)
                    try db.execute(
                        sql: "DELETE FROM \(table) WHERE id IN (SELECT id FROM \(table) WHERE \(time) < ? ORDER BY id LIMIT \(Self.pruneChunk))",
                        arguments: [cutoff])
                    var count = db.changesCount
                    // Beyond the row bound: the oldest (ids only grow).
                    if let newest = try Int64.fetchOne(db, sql: "SELECT max(id) FROM \(table)") {
                        let keepFrom = newest.saturatingSubtracting(Int64(limits.maxRows))
                        try db.execute(
                            sql: "DELETE FROM \(table) WHERE id IN (SELECT id FROM \(table) WHERE id <= ? ORDER BY id LIMIT \(Self.pruneChunk))",
                            arguments: [keepFrom])
                        count += db.changesCount
                    }
                    return count
                }
                total += deleted
                if deleted < Self.pruneChunk { break }
            }
        }
        return total
    }

    /// The delivery history's attempts and the bytes their table and indexes take in the
    /// database file (SQLite's `dbstat`); `nil` when this SQLite lacks `dbstat`.
    public func historyStorage() async throws -> (attempts: Int, bytes: Int64)? {
        try await read { db in
            let attempts = try Int.fetchOne(db, sql: "SELECT count(*) FROM delivery_attempt") ?? 0
            guard
                let bytes = try? Int64.fetchOne(
                    db,
                    sql: """
                        SELECT sum(pgsize) FROM dbstat
                        WHERE name IN ('delivery_attempt', 'delivery_attempt_by_era', 'delivery_attempt_by_record')
                        """)
            else { return nil }
            return (attempts, bytes)
        }
    }
}
