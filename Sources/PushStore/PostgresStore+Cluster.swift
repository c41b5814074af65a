import Foundation
import Logging
import PostgresNIO
import PushCore
import PushContracts
import PushJSON

extension PostgresStore: ClusterStore {
    /// The channel that wakes instances: `inbox` (records wait for their owner), `outbox`
    /// (notifications wait for a sender). Subscription changes have their own
    /// (``subscriptionChannel``), notified by the change-log trigger.
    public static let workChannel = "pushdispatch_work"
    public static let subscriptionChannel = "pushdispatch_subscription_change"

    public func enqueue(_ records: [InboxRecord], checkpoints: [SourceCheckpoint]) async throws -> EnqueueResult {
        guard !records.isEmpty || !checkpoints.isEmpty else { return EnqueueResult() }
        return try await transaction(writerLock: false) { connection in
            // The sources' rows, locked in one order (rows made first, so that there is a row to
            // lock): the watermarks other instances committed, and none commits meanwhile.
            let sources = Set(checkpoints.map(\.source)).union(records.map(\.source)).sorted()
            try await connection.query(
                """
                INSERT INTO source_checkpoint (source, last_seq, position, file_identity)
                SELECT unnest(\(sources)::text[]), NULL, 0, NULL ON CONFLICT (source) DO NOTHING
                """, logger: self.logger)
            var stored: [String: Int64] = [:]
            let rows = try await connection.query(
                "SELECT source, last_seq FROM source_checkpoint WHERE source = ANY(\(sources)) ORDER BY source FOR UPDATE", logger: self.logger)
            for try await (source, lastSeq) in rows.decode((String, Int64?).self) {
                if let lastSeq { stored[source] = lastSeq }
            }
            var result = EnqueueResult()
            var kept: [InboxRecord] = []
            for (index, record) in records.enumerated() {
                if let seq = record.seq, let watermark = stored[record.source], seq <= watermark {
                    result.duplicates.append((index, watermark))
                } else {
                    kept.append(record)
                }
            }
            let records = kept
            if !records.isEmpty {
                // One statement for the batch: arrays unnested in order (ids follow it).
                try await connection.query(
                    """
                    INSERT INTO inbox (app, source, position, line, received_at)
                    SELECT app, source, position, decode(line, 'base64'), \(unescaped: Self.databaseMilliseconds)
                    FROM unnest(\(records.map(\.app))::text[], \(records.map(\.source))::text[], \(records.map(\.position))::bigint[],
                                \(records.map { Data($0.line).base64EncodedString() })::text[])
                         WITH ORDINALITY AS r(app, source, position, line, n)
                    ORDER BY n
                    """, logger: self.logger)
                _ = try await connection.query("SELECT pg_notify(\(Self.workChannel), 'inbox')", logger: self.logger).collect()
            }
            // A watermark never moves back (another instance may be further on).
            let checkpoints = checkpoints.map { checkpoint in
                var checkpoint = checkpoint
                if let other = stored[checkpoint.source], other > checkpoint.lastSeq ?? .min { checkpoint.lastSeq = other }
                return checkpoint
            }
            try await Self.store(checkpoints, on: connection, logger: self.logger)
            result.watermarks = stored
            for checkpoint in checkpoints {
                if let lastSeq = checkpoint.lastSeq { result.watermarks[checkpoint.source] = lastSeq }
            }
            return result
        }
    }

    public func inbox(app: String, limit: Int) async throws -> [InboxRecord] {
        var records: [InboxRecord] = []
        try await run { session in
            let rows = try await session.query(
                "SELECT id, app, source, position, line FROM inbox WHERE app = \(app) ORDER BY id LIMIT \(Int64(limit))")
            for try await (id, app, source, position, line) in rows.decode((Int64, String, String, Int64, ByteBuffer).self) {
                records.append(InboxRecord(id: id, app: app, source: source, position: position, line: Array(line.readableBytesView)))
            }
        }
        return records
    }

    public func inboxApplications() async throws -> [String] {
        var apps: [String] = []
        try await run { session in
            for try await app in try await session.query("SELECT DISTINCT app FROM inbox ORDER BY 1").decode(String.self) { apps.append(app) }
        }
        return apps
    }

    public func inboxDepth() async throws -> Int {
        var depth = 0
        try await run { session in
            for try await count in try await session.query("SELECT count(*) FROM inbox").decode(Int64.self) { depth = Int(count) }
        }
        return depth
    }

    @discardableResult
    public func heartbeat(instance: String, address: String, report: [UInt8]?) async throws -> Int64 {
        var now: Int64 = 0
        let report = report.flatMap { $0.count <= InstanceReport.maximumBytes ? ByteBuffer(bytes: $0) : nil }
        try await run { session in
            let rows = try await session.query(
                """
                INSERT INTO instance (name, address, started_at, heartbeat_at, report)
                VALUES (\(instance), \(address), \(unescaped: Self.databaseMilliseconds), \(unescaped: Self.databaseMilliseconds), \(report))
                ON CONFLICT (name) DO UPDATE SET address = excluded.address, heartbeat_at = excluded.heartbeat_at,
                    report = coalesce(excluded.report, instance.report)
                RETURNING heartbeat_at
                """)
            for try await value in rows.decode(Int64.self) { now = value }
        }
        return now
    }

    public func instanceReports(within: Int64) async throws -> [String: [UInt8]] {
        var reports: [String: [UInt8]] = [:]
        try await run { session in
            let rows = try await session.query(
                """
                SELECT name, report FROM instance
                WHERE heartbeat_at >= \(unescaped: Self.databaseMilliseconds) - \(within) AND NOT retiring AND report IS NOT NULL
                """)
            for try await (name, report) in rows.decode((String, ByteBuffer).self) { reports[name] = Array(buffer: report) }
        }
        return reports
    }

    /// Before the socket's `seq` was shared by every instance (issue 22), each instance filed its
    /// socket's checkpoint under its name (`node-1/socket`): the shared `socket` takes the
    /// highest of their watermarks, once, and they go.
    public func adoptInstanceSocketCheckpoints() async throws {
        try await transaction(writerLock: false) { connection in
            try await connection.query(
                """
                INSERT INTO source_checkpoint (source, last_seq, position, file_identity)
                SELECT 'socket', max(last_seq), 0, NULL FROM source_checkpoint WHERE source LIKE '%/socket' HAVING count(*) > 0
                ON CONFLICT (source) DO NOTHING
                """, logger: self.logger)
            try await connection.query("DELETE FROM source_checkpoint WHERE source LIKE '%/socket'", logger: self.logger)
        }
    }

    public func instanceState(named name: String) async throws -> (heartbeatAt: Int64, retiring: Bool, address: String, now: Int64)? {
        var state: (Int64, Bool, String, Int64)?
        try await run { session in
            let rows = try await session.query(
                "SELECT heartbeat_at, retiring, address, \(unescaped: Self.databaseMilliseconds) FROM instance WHERE name = \(name)")
            for try await row in rows.decode((Int64, Bool, String, Int64).self) { state = row }
        }
        return state.map { (heartbeatAt: $0.0, retiring: $0.1, address: $0.2, now: $0.3) }
    }

    /// Marks a new start of `instance` (its uptime counts from now).
    public func registerStart(instance: String, address: String) async throws {
        try await run { session in
            try await session.query(
                """
                INSERT INTO instance (name, address, started_at, heartbeat_at)
                VALUES (\(instance), \(address), \(unescaped: Self.databaseMilliseconds), \(unescaped: Self.databaseMilliseconds))
                ON CONFLICT (name) DO UPDATE SET address = excluded.address, started_at = excluded.started_at,
                                                 heartbeat_at = excluded.heartbeat_at, retiring = false
                """)
        }
    }

    public func retire(instance: String) async throws {
        try await run { session in
            try await session.query("UPDATE instance SET retiring = true WHERE name = \(instance)")
        }
    }

    public func forget(instance: String) async throws {
        try await run { session in
            try await session.query("DELETE FROM instance WHERE name = \(instance)")
        }
    }

    public func instances(within: Int64) async throws -> [InstanceInfo] {
        var instances: [InstanceInfo] = []
        try await run { session in
            let rows = try await session.query(
                """
                SELECT name, address, started_at, heartbeat_at FROM instance
                WHERE heartbeat_at >= \(unescaped: Self.databaseMilliseconds) - \(within) AND NOT retiring ORDER BY name
                """)
            for try await (name, address, started, heartbeat) in rows.decode((String, String, Int64, Int64).self) {
                instances.append(InstanceInfo(name: name, address: address, startedAt: started, heartbeatAt: heartbeat))
            }
        }
        return instances
    }

    public func renewLeases(holder: String, ttl: Int64) async throws -> [String: Int64] {
        var held: [String: Int64] = [:]
        try await run { session in
            let rows = try await session.query(
                """
                UPDATE app_lease SET expires_at = \(unescaped: Self.databaseMilliseconds) + \(ttl)
                WHERE owner = \(holder) AND expires_at > \(unescaped: Self.databaseMilliseconds)
                RETURNING app, token
                """)
            for try await (app, token) in rows.decode((String, Int64).self) { held[app] = token }
        }
        return held
    }

    /// Takes `app`'s lease when it has expired; `nil` when someone holds it, or when a commit
    /// under it is still running after ``leaseLockTimeout`` (tried again at the next round: the
    /// caller's heartbeat and renewals must not wait behind another instance's commit).
    public func acquireLease(app: String, holder: String, ttl: Int64) async throws -> Int64? {
        do {
            return try await transaction(writerLock: false) { session in
                try await session.query("SELECT set_config('lock_timeout', \(String(Self.leaseLockTimeout)), true)").collect()
                return try await Self.takeLease(app: app, holder: holder, ttl: ttl, session)
            }
        } catch let error as StoreError where error.kind == .busy {
            return nil
        }
    }

    /// Milliseconds a takeover waits for a commit holding the lease row.
    static let leaseLockTimeout = 1_000

    private static func takeLease(app: String, holder: String, ttl: Int64, _ session: PostgresSession) async throws -> Int64? {
        var token: Int64?
        // Waits for a commit holding the lease (it locks the row) to end: fencing; at most the
        // lock timeout (lock_not_available, 55P03: StoreError.busy).
        let rows = try await session.query(
            """
            INSERT INTO app_lease (app, owner, token, expires_at)
            VALUES (\(app), \(holder), 1, \(unescaped: Self.databaseMilliseconds) + \(ttl))
            ON CONFLICT (app) DO UPDATE SET owner = excluded.owner, token = app_lease.token + 1, expires_at = excluded.expires_at
            WHERE app_lease.expires_at <= \(unescaped: Self.databaseMilliseconds)
            RETURNING token
            """)
        for try await value in rows.decode(Int64.self) { token = value }
        return token
    }

    public func releaseLease(app: String, holder: String) async throws {
        try await run { session in
            try await session.query("UPDATE app_lease SET expires_at = 0 WHERE app = \(app) AND owner = \(holder)")
        }
    }

    public func leases() async throws -> [ApplicationLease] {
        var leases: [ApplicationLease] = []
        try await run { session in
            for try await (app, owner, token, expires) in try await session.query("SELECT app, owner, token, expires_at FROM app_lease ORDER BY app")
                .decode((String, String, Int64, Int64).self)
            {
                leases.append(ApplicationLease(app: app, owner: owner, token: token, expiresAt: expires))
            }
        }
        return leases
    }

    public func releaseClaimsOfStaleInstances(staleAfter: Int64) async throws -> Int {
        var released = 0
        try await run { session in
            released = try await session.query(
                """
                UPDATE notification SET claimed_by = NULL, claimed_until = NULL
                WHERE claimed_by IN (SELECT name FROM instance WHERE heartbeat_at < \(unescaped: Self.databaseMilliseconds) - \(staleAfter))
                RETURNING id
                """
            ).collect().count
            // Instances silent for a day are forgotten (their claims were released long ago;
            // instances named after their process leave a row at every crash).
            try await session.query("DELETE FROM instance WHERE heartbeat_at < \(unescaped: Self.databaseMilliseconds) - 86400000")
        }
        return released
    }

    public func signal(_ signal: ClusterSignal) async {
        // Best effort: every waiter also polls, so a lost wake-up only delays.
        switch signal {
        case .subscriptions:
            // The change-log trigger notifies every committed subscription change itself.
            return
        case .inbox, .outbox:
            try? await run { session in _ = try await session.query("SELECT pg_notify(\(Self.workChannel), \(signal.rawValue))").collect() }
        }
    }

    /// Listens on the work and subscription channels until cancelled, reconnecting after a
    /// failure; `wake` gets each notification's signal. A notification missed while
    /// reconnecting only delays: every follower also polls.
    public func announce(resumed sender: SenderKey) async {
        let notice = Self.resumeNotice(sender)
        try? await run { session in _ = try await session.query("SELECT pg_notify(\(Self.workChannel), \(notice))").collect() }
    }

    /// `resume {"app","kind","destination"}` on the work channel (a notification carries at
    /// most 8,000 bytes: an application id is at most 128, a webhook name less).
    static func resumeNotice(_ sender: SenderKey) -> String {
        var writer = JSONWriter()
        writer.write(
            .object(
                JSONObject([
                    (Key("app"), .string(sender.app)), (Key("kind"), .string(sender.kind.rawValue)),
                    (Key("destination"), sender.destination.map { .string($0) } ?? .null),
                ])))
        return "resume " + String(decoding: writer.bytes, as: UTF8.self)
    }

    /// The sender a `resume` notice names, or `nil` for anything else.
    static func resumed(_ payload: String) -> SenderKey? {
        guard payload.hasPrefix("resume "), let json = try? JSONParser.parse(Array(payload.utf8.dropFirst(7))),
            let app = json["app"]?.stringValue, let kind = json["kind"]?.stringValue.flatMap(SubscriptionKind.init(rawValue:))
        else { return nil }
        let destination = json["destination"]?.stringValue
        guard kind != .webhook || destination != nil else { return nil }
        return SenderKey(app: app, kind: kind, destination: destination)
    }

    public func listen(_ wake: @escaping @Sendable (ClusterSignal) -> Void, resumed: @escaping @Sendable (SenderKey) -> Void) async {
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: Self.subscriptionChannel) { changes in
                        try await connection.listen(on: Self.workChannel) { work in
                            try await withThrowingTaskGroup(of: Void.self) { group in
                                group.addTask { for try await _ in changes { wake(.subscriptions) } }
                                group.addTask {
                                    for try await item in work {
                                        if let signal = ClusterSignal(rawValue: item.payload) {
                                            wake(signal)
                                        } else if let sender = Self.resumed(item.payload) {
                                            resumed(sender)
                                        }
                                    }
                                }
                                try await group.next()
                                group.cancelAll()
                            }
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.warning("PostgreSQL notifications interrupted; listening again", metadata: ["error": "\(String(reflecting: error).prefix(200))"])
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
