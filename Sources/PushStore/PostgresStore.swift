import Foundation
import Logging
import PostgresNIO
import PushCore
import PushJOSE
import PushContracts
import PushJSON
import Synchronization

/// The PostgreSQL store (SPEC §9 `store.postgres`), for several instances sharing one
/// database: subscriptions, their change log and the service keys, with the invariants in the
/// schema as in SQLite (``PostgresMigrations``).
///
/// The change log must be read in commit order by every instance's index, and PostgreSQL
/// sequences are not commit-ordered: two writers can draw 5 and 6 and commit 6 first, and a
/// reader that saw 6 would skip 5 for ever. So every transaction that writes subscriptions
/// takes one transaction-scoped advisory lock (``writerLock``) before it draws a change
/// number: writers of subscriptions commit one at a time, in the order of their numbers, and
/// a reader never sees a number before a smaller one commits. Subscription writes are small
/// and rare next to deliveries; the lock costs them concurrency, nothing else.
///
/// The client runs in a task of its own from ``open(url:logger:)`` until ``close()``.
public final class PostgresStore: SubscriptionStore, ServiceKeyStore, Sendable {
    public let client: PostgresClient
    let runner: Task<Void, Never>
    let logger: Logger
    /// Where it is, without the password (messages).
    public let location: String
    /// The connection holding the deployment lock (``holdDeploymentLock(shared:)``), released
    /// at ``close()``.
    let deploymentHold = Mutex<(waiter: CheckedContinuation<Void, Never>?, closed: Bool)>((nil, false))

    /// The advisory lock every subscription writer holds until it commits (see above).
    static let writerLock: Int64 = 0x7075_7368_5f73_7562  // "push_sub" = 8103509996638270818 (the change-log trigger takes it too)
    /// The advisory lock migrations hold (one instance migrates, the others wait).
    static let migrationLock: Int64 = 0x7075_7368_5f6d_6967  // "push_mig"

    init(client: PostgresClient, runner: Task<Void, Never>, logger: Logger, location: String) {
        self.client = client
        self.runner = runner
        self.logger = logger
        self.location = location
    }

    /// Connects to `url` (`postgres://user:password@host:port/database`, with `sslmode` and
    /// `sslrootcert` as in libpq: ``PostgresTLS``), runs the client and migrates the schema
    /// (guarded by an advisory lock: of instances starting together, one migrates and the
    /// others then find it done). One connection is made first, alone, so that a server that
    /// refuses it or a certificate that fails verification is reported at once, with its reason.
    public static func open(url: String, logger: Logger) async throws -> PostgresStore {
        let target = try PostgresURL(url)
        let (configuration, check) = try target.configurations()
        try await target.check(check, logger: logger)
        let location = target.location
        let client = PostgresClient(configuration: configuration, backgroundLogger: Self.backgroundLogger(logger))
        let runner = await Self.start(client)
        let store = PostgresStore(client: client, runner: runner, logger: logger, location: location)
        do {
            try await PostgresMigrations.migrate(client, logger: logger)
        } catch {
            store.close()
            throw Self.storeError(error, subscriptionID: nil, location: location)
        }
        return store
    }

    /// Runs the client's background work for as long as the store is open (``close()`` cancels
    /// it) and returns once the runner has begun: `run()` follows without a suspension, so the
    /// first query finds the pool running instead of waiting for it (postgres-nio warns when a
    /// connection is leased before `run()`). No fixed sleep. Not a `ServiceGroup` service: the
    /// store is used before the group starts (migrations, keys, the index) and by one-shot
    /// commands, and must outlive every service at shutdown (docs/decisions.md).
    static func start(_ client: PostgresClient) async -> Task<Void, Never> {
        let (begun, signal) = AsyncStream<Void>.makeStream()
        let runner = Task {
            signal.finish()
            await client.run()
        }
        for await _ in begun {}
        return runner
    }

    /// The client's logger, `logger` but for one message: postgres-nio warns when a connection
    /// is leased before `run()` has marked the client running, and that mark is a relaxed
    /// atomic set on the runner's thread. ``start(_:)`` starts the runner before any query, but
    /// on a loaded machine the first query can still read the mark before the runner sets it;
    /// the lease then waits for the pool (nothing is wrong), so that warning is logged at debug.
    static func backgroundLogger(_ logger: Logger) -> Logger {
        var wrapped = Logger(label: logger.label) { _ in EarlyLeaseDemoted(inner: logger.handler) }
        wrapped.logLevel = logger.logLevel
        return wrapped
    }

    struct EarlyLeaseDemoted: LogHandler {
        var inner: any LogHandler
        var metadata: Logger.Metadata {
            get { inner.metadata }
            set { inner.metadata = newValue }
        }
        var logLevel: Logger.Level {
            get { inner.logLevel }
            set { inner.logLevel = newValue }
        }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { inner[metadataKey: key] }
            set { inner[metadataKey: key] = newValue }
        }

        func log(event: LogEvent) {
            var event = event
            if event.level == .warning, "\(event.message)".hasPrefix("Trying to lease connection from `PostgresClient`, but `PostgresClient.run()`") {
                guard inner.logLevel <= .debug else { return }
                event.level = .debug
            }
            inner.log(event: event)
        }
    }

    /// Stops the client (queries after this fail); the deployment lock goes with it.
    public func close() {
        let waiter = deploymentHold.withLock { hold in
            defer { hold = (nil, true) }
            return hold.waiter
        }
        waiter?.resume()
        runner.cancel()
    }

    // MARK: - Subscriptions

    static let columns = "handle, id, app, uid, kind, destination, path, context, mode, format, encryption, created_at, expires_at, auth"

    public func save(_ subscription: Subscription, allowUpdate: Bool) async throws -> SaveOutcome {
        try await save(subscription, allowUpdate: allowUpdate, maxPerUser: nil)
    }

    public func save(_ subscription: Subscription, allowUpdate: Bool, maxPerUser: Int?) async throws -> SaveOutcome {
        try await writing(subscriptionID: subscription.id) { connection in
            let rows = try await connection.query(
                "SELECT \(unescaped: Self.columns) FROM subscription WHERE id = \(subscription.id)", logger: self.logger
            ).collect()
            if let row = rows.first {
                let existing = try Self.subscription(row)
                guard allowUpdate else { return .conflict(existing) }
                try await connection.query(
                    """
                    UPDATE subscription SET mode = \(subscription.mode.rawValue), format = \(subscription.format.rawValue),
                        encryption = \(subscription.encryption.map { $0.json.description }), expires_at = \(subscription.expiresAt),
                        auth = \(subscription.authText)
                    WHERE handle = \(existing.handle ?? 0)
                    """, logger: self.logger)
                var refreshed = subscription
                refreshed.handle = existing.handle
                refreshed.createdAt = existing.createdAt
                return .refreshed(refreshed)
            }
            let tuple = subscription.tuple
            if let maxPerUser {
                // Under the subscription writers' lock: no other create commits meanwhile.
                let rows = try await connection.query(
                    "SELECT count(*) FROM (SELECT 1 FROM subscription WHERE app = \(tuple.app) AND uid = \(tuple.uid) LIMIT \(maxPerUser)) AS mine",
                    logger: self.logger
                ).collect()
                let count = Int(try rows.first?.decode(Int64.self) ?? 0)
                if count >= maxPerUser { return .tooMany(count: count) }
            }
            let inserted = try await connection.query(
                """
                INSERT INTO subscription (id, app, uid, kind, destination, path, context, mode, format, encryption, created_at, expires_at, auth)
                VALUES (\(subscription.id), \(tuple.app), \(tuple.uid), \(tuple.kind.rawValue), \(tuple.destination ?? ""),
                        \(tuple.path.string), \(tuple.context ?? ""), \(subscription.mode.rawValue), \(subscription.format.rawValue),
                        \(subscription.encryption.map { $0.json.description }), \(subscription.createdAt), \(subscription.expiresAt),
                        \(subscription.authText))
                RETURNING handle
                """, logger: self.logger
            ).collect()
            var created = subscription
            created.handle = try inserted.first?.decode(Int64.self)
            return .created(created)
        }
    }

    public func subscription(app: String, uid: String, id: String) async throws -> Subscription? {
        try await reading(
            "SELECT \(unescaped: Self.columns) FROM subscription WHERE id = \(id) AND app = \(app) AND uid = \(uid)"
        ).first
    }

    public func subscription(id: String) async throws -> Subscription? {
        try await reading("SELECT \(unescaped: Self.columns) FROM subscription WHERE id = \(id)").first
    }

    public func subscriptions(app: String, uid: String) async throws -> [Subscription] {
        // Byte order of the ids, as SQLite's (SPEC §11.12 orders by the id strings' bytes).
        try await reading("SELECT \(unescaped: Self.columns) FROM subscription WHERE app = \(app) AND uid = \(uid) ORDER BY id COLLATE \"C\"")
    }

    public func subscriptions(app: String?, after handle: Int64, limit: Int) async throws -> [Subscription] {
        if let app {
            return try await reading(
                "SELECT \(unescaped: Self.columns) FROM subscription WHERE app = \(app) AND handle > \(handle) ORDER BY handle LIMIT \(Int64(limit))")
        }
        return try await reading("SELECT \(unescaped: Self.columns) FROM subscription WHERE handle > \(handle) ORDER BY handle LIMIT \(Int64(limit))")
    }

    public func subscriptions(handles: [Int64]) async throws -> [Int64: Subscription] {
        if handles.isEmpty { return [:] }
        var found: [Int64: Subscription] = [:]
        for subscription in try await reading("SELECT \(unescaped: Self.columns) FROM subscription WHERE handle = ANY(\(handles))") {
            found[subscription.handle ?? 0] = subscription
        }
        return found
    }

    public func remove(app: String, uid: String, id: String) async throws -> Subscription? {
        try await writing(subscriptionID: id) { connection in
            let rows = try await connection.query(
                "DELETE FROM subscription WHERE id = \(id) AND app = \(app) AND uid = \(uid) RETURNING \(unescaped: Self.columns)", logger: self.logger
            ).collect()
            return try rows.first.map(Self.subscription)
        }
    }

    public func updateExpiration(app: String, uid: String, id: String, expiresAt: Int64, auth: JSON?) async throws -> Subscription? {
        try await writing(subscriptionID: id) { connection in
            let rows = try await connection.query(
                """
                UPDATE subscription SET expires_at = \(expiresAt), auth = \(auth.map { $0.description })
                WHERE id = \(id) AND app = \(app) AND uid = \(uid)
                RETURNING \(unescaped: Self.columns)
                """, logger: self.logger
            ).collect()
            return try rows.first.map(Self.subscription)
        }
    }

    public func countByKind() async throws -> [SubscriptionKind: Int] {
        var counts: [SubscriptionKind: Int] = [:]
        for (name, value) in try await tally() where name.hasPrefix("subscription:") && value > 0 {
            if let kind = SubscriptionKind(rawValue: String(name.dropFirst(13))) { counts[kind] = value }
        }
        return counts
    }

    /// The counts the tally triggers keep (migration 3), by name. The rows of sessions that
    /// ended are first folded into shard 0, so that the table stays a few rows per session.
    func tally() async throws -> [String: Int] {
        var sums: [String: Int] = [:]
        try await run { client in
            _ = try await client.query(
                """
                WITH gone AS (
                    DELETE FROM tally WHERE shard <> 0 AND shard NOT IN (SELECT pid FROM pg_stat_activity) RETURNING name, value
                )
                INSERT INTO tally (name, shard, value) SELECT name, 0, sum(value) FROM gone GROUP BY name ORDER BY name
                ON CONFLICT (name, shard) DO UPDATE SET value = tally.value + excluded.value
                """, logger: self.logger
            ).collect()
            for try await (name, value) in try await client.query("SELECT name, sum(value)::bigint FROM tally GROUP BY name").decode((String, Int64).self) {
                sums[name] = Int(value)
            }
        }
        return sums
    }

    // MARK: - Index support

    public func indexRecords(after handle: Int64, limit: Int) async throws -> [IndexRecord] {
        var records: [IndexRecord] = []
        try await run { session in
            let rows = try await session.query(
                "SELECT handle, app, path, mode FROM subscription WHERE handle > \(handle) ORDER BY handle LIMIT \(Int64(limit))")
            for try await (handle, app, path, mode) in rows.decode((Int64, String, String, String).self) {
                records.append(IndexRecord(handle: handle, app: app, path: try SQLiteStore.path(path), mode: try SQLiteStore.mode(mode)))
            }
        }
        return records
    }

    public func changes(after sequence: Int64, limit: Int) async throws -> [SubscriptionChange] {
        var changes: [SubscriptionChange] = []
        try await run { session in
            // One snapshot for the watermark and the rows.
            try await session.withTransaction(logger: self.logger) { connection in
                try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", logger: self.logger)
                var pruned: Int64 = 0
                for try await value in try await connection.query("SELECT pruned_through FROM change_log_state WHERE id = 1", logger: self.logger)
                    .decode(Int64.self)
                { pruned = value }
                if sequence < pruned { throw StoreError.changeLogPruned(through: pruned) }
                let rows = try await connection.query(
                    """
                    SELECT sequence, operation, handle, app, path, mode FROM subscription_change
                    WHERE sequence > \(sequence) ORDER BY sequence LIMIT \(Int64(limit))
                    """, logger: self.logger)
                for try await (number, operation, handle, app, path, mode) in rows.decode((Int64, String, Int64, String, String, String).self) {
                    guard let operation = SubscriptionChange.Operation(rawValue: operation) else {
                        throw StoreError.corrupt("unknown change operation \(JSONWriter.quoted(operation))")
                    }
                    changes.append(
                        SubscriptionChange(
                            sequence: number, operation: operation, handle: handle, app: app, path: try SQLiteStore.path(path),
                            mode: try SQLiteStore.mode(mode)))
                }
            }
        }
        return changes
    }

    public func lastChange() async throws -> Int64 {
        var last: Int64 = 0
        try await run { session in
            // The last number drawn and committed (pruning keeps it).
            for try await value in try await session.query("SELECT last_sequence FROM change_log_state WHERE id = 1").decode(Int64.self) {
                last = value
            }
        }
        return last
    }

    public func pruneChanges(through sequence: Int64) async throws {
        try await writing(subscriptionID: nil) { connection in
            try await connection.query(
                """
                UPDATE change_log_state SET pruned_through = greatest(pruned_through, least(\(sequence), last_sequence)) WHERE id = 1
                """, logger: self.logger)
            try await connection.query(
                "DELETE FROM subscription_change WHERE sequence <= (SELECT pruned_through FROM change_log_state WHERE id = 1)", logger: self.logger)
        }
    }

    // MARK: - Service keys

    public func loadServiceKeys() async throws -> [JSON] {
        var texts: [String] = []
        try await run { session in
            for try await text in try await session.query("SELECT jwk FROM service_key ORDER BY created_at, kid").decode(String.self) {
                texts.append(text)
            }
        }
        return try texts.map { try SQLiteStore.parse($0, what: "a service key") }
    }

    public func createServiceKeyIfNone(_ jwk: JSON, kid: String) async throws -> [JSON] {
        // Under the writers' lock: of instances starting together, the first creates the key
        // and the others see it.
        let texts = try await writing(subscriptionID: nil) { connection in
            try await connection.query(
                """
                INSERT INTO service_key (kid, jwk, created_at)
                SELECT \(kid), \(jwk.description), extract(epoch FROM now())::bigint WHERE NOT EXISTS (SELECT 1 FROM service_key)
                """, logger: self.logger)
            var texts: [String] = []
            for try await text in try await connection.query("SELECT jwk FROM service_key ORDER BY created_at, kid", logger: self.logger)
                .decode(String.self)
            { texts.append(text) }
            return texts
        }
        return try texts.map { try SQLiteStore.parse($0, what: "a service key") }
    }

    // MARK: - Plumbing

    /// A write transaction holding the subscription writers' lock.
    func writing<T: Sendable>(subscriptionID: String?, _ body: (PostgresSession) async throws -> T) async throws -> T {
        try await transaction(writerLock: true, subscriptionID: subscriptionID, body)
    }

    /// A transaction, holding the subscription writers' lock from its start when `writerLock`
    /// (any transaction that may write subscriptions must: see the type's documentation).
    func transaction<T: Sendable>(
        writerLock: Bool, subscriptionID: String? = nil, _ body: (PostgresSession) async throws -> T
    ) async throws -> T {
        do {
            return try await client.withConnection { connection in
                try await PostgresSession(connection: connection, logger: self.logger).withTransaction { session in
                    if writerLock {
                        _ = try await session.query("SELECT pg_advisory_xact_lock(\(Self.writerLock))").collect()
                    }
                    return try await body(session)
                }
            }
        } catch {
            throw Self.storeError(error, subscriptionID: subscriptionID, location: location)
        }
    }

    func reading(_ query: PostgresQuery) async throws -> [Subscription] {
        var subscriptions: [Subscription] = []
        try await run { session in
            for row in try await session.query(query).collect() { subscriptions.append(try Self.subscription(row)) }
        }
        return subscriptions
    }

    /// `body` on one leased connection (``PostgresSession``: no query waits for ever).
    func run(_ body: (PostgresSession) async throws -> Void) async throws {
        do {
            try await client.withConnection { connection in try await body(PostgresSession(connection: connection, logger: self.logger)) }
        } catch {
            throw Self.storeError(error, subscriptionID: nil, location: location)
        }
    }

    static func sqlState(_ error: any Error) -> (state: String, message: String, constraint: String?)? {
        if let error = error as? PSQLError, let info = error.serverInfo, let state = info[.sqlState] {
            return (state, info[.message] ?? "", info[.constraintName])
        }
        return nil
    }

    static func storeError(_ error: any Error, subscriptionID: String?, location: String) -> StoreError {
        if let error = error as? StoreError { return error }
        if let error = error as? RequestError { return StoreError.corrupt(error.message, subscriptionID: subscriptionID) }
        guard let (state, message, constraint) = sqlState(error) else {
            return StoreError.unavailable("PostgreSQL at \(location): \(String(reflecting: error).prefix(300))", subscriptionID: subscriptionID)
        }
        switch state {
        case "23505" where constraint == "subscription_id_key":
            return StoreError.duplicate(subscriptionID: subscriptionID)
        case let state where state.hasPrefix("23"):
            return StoreError.constraint("\(message)\(constraint.map { " (\($0))" } ?? "")", subscriptionID: subscriptionID)
        case "40001", "40P01", "55P03":
            return StoreError.busy(subscriptionID: subscriptionID)
        default:
            return StoreError.unavailable("PostgreSQL at \(location): \(message) (SQLSTATE \(state))", subscriptionID: subscriptionID)
        }
    }

    static func subscription(_ row: PostgresRow) throws -> Subscription {
        let (handle, id, app, uid, kindText, destination, pathText, context, modeText, formatText, encryptionText, createdAt, expiresAt, authText) =
            try row.decode((Int64, String, String, String, String, String, String, String, String, String, String?, Int64, Int64, String?).self)
        guard let kind = SubscriptionKind(rawValue: kindText), let format = PayloadFormat(rawValue: formatText) else {
            throw StoreError.corrupt("a subscription row has an unknown kind or format", subscriptionID: id)
        }
        var encryption: EncryptionSpec?
        if let encryptionText {
            do {
                encryption = try EncryptionSpec.decode(try SQLiteStore.parse(encryptionText, what: "encryption"), field: "encryption")
            } catch let error as RequestError {
                throw StoreError.corrupt(error.message, subscriptionID: id)
            }
        }
        return Subscription(
            id: id,
            tuple: SubscriptionTuple(
                app: app, uid: uid, kind: kind, destination: destination.isEmpty ? nil : destination, path: try SQLiteStore.path(pathText),
                context: kind != .webhook || !context.isEmpty ? context : nil),
            mode: try SQLiteStore.mode(modeText), format: format, encryption: encryption, createdAt: createdAt, expiresAt: expiresAt,
            handle: handle, auth: try authText.map { try SQLiteStore.parse($0, what: "auth") })
    }
}
