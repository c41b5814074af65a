import GRDB
import PushCore
import PushJOSE
import PushContracts
import PushJSON
import Synchronization

/// The embedded store: one SQLite database in WAL mode (GRDB `DatabasePool`: one writer,
/// concurrent readers, several processes may open it).
///
/// Commits are durable (`synchronous = FULL`): a subscription the API acknowledged survives a
/// crash or a power cut. The dispatcher's claims and settlements alone are committed without
/// waiting for the disk (``writeRelaxed(_:)``): a power cut can only make them be done again.
public final class SQLiteStore: SubscriptionStore, ServiceKeyStore {
    public let path: String
    let pool: any DatabaseWriter
    /// Saves waiting for the writer (``save(_:allowUpdate:maxPerUser:)``).
    let saves = Mutex(SaveQueue())
    /// Whether the writer may still be at `synchronous = NORMAL`: set by a relaxed write
    /// (``writeRelaxed(_:)``) until it has set `FULL` back; a durable write that finds it set
    /// sets `FULL` itself first, or fails.
    let relaxed = Mutex(false)

    /// Saves are committed in groups: while one group's transaction runs, the saves that arrive
    /// wait, and go together in the next one (one `fdatasync` for all of them). Each save runs
    /// in its own savepoint, so one that fails fails alone.
    struct SaveQueue: ~Copyable {
        struct Waiting {
            var subscription: Subscription
            var allowUpdate: Bool
            var maxPerUser: Int?
            var continuation: CheckedContinuation<SaveOutcome, any Error>
        }

        var waiting: [Waiting] = []
        var committing = false
    }

    /// Opens an existing database to read it only (`replay --dry-run`): nothing is created,
    /// migrated or written.
    public init(readingOnly path: String) throws {
        self.path = path
        SQLiteProcessSettings.apply()
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        do {
            pool = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            throw StoreError.unavailable("cannot open the SQLite database \(path) to read it: \(Self.reason(error))")
        }
    }

    /// Opens (creating if needed, readable by its owner only) the database at `path` and
    /// brings its schema up to date. A database the group or others may read is refused
    /// (``SQLiteFiles/prepare(_:)``).
    public init(path: String) throws {
        self.path = path
        SQLiteProcessSettings.apply()
        try SQLiteFiles.prepare(path)
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            if !db.configuration.readonly {
                // The writer commits batches of ~1 KB rows: a larger page cache saves reading
                // pages back, and checkpoints every ~32 MB of WAL instead of 4 MB amortise their
                // fsyncs (the WAL is reset after each).
                try db.execute(sql: "PRAGMA cache_size = -32768")
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 8192")
                // Debian builds SQLite with SECURE_DELETE: every page freed (a tree journal's
                // ~8 MB of overflow pages at each snapshot, settled notifications) would be
                // zeroed and written through the WAL and the checkpoint again. FAST still zeroes
                // deleted content inside the pages a transaction writes anyway; freed pages
                // keep theirs until reused (the next journal rows, within a snapshot period).
                try db.execute(sql: "PRAGMA secure_delete = FAST")
            }
        }
        do {
            let pool = try DatabasePool(path: path, configuration: configuration)
            // GRDB sets `synchronous = NORMAL` on the writer when it turns WAL mode on, after
            // `prepareDatabase`: a commit would then reach the disk only at the next checkpoint,
            // and a power cut could lose records already acknowledged. The writer connection
            // lives as long as the pool, so setting it again here holds.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
            try SQLiteMigrations.migrator.migrate(pool)
            self.pool = pool
        } catch {
            throw StoreError.unavailable("cannot open the SQLite database \(path): \(Self.reason(error))")
        }
    }

    // MARK: - Subscriptions

    public func save(_ subscription: Subscription, allowUpdate: Bool) async throws -> SaveOutcome {
        try await save(subscription, allowUpdate: allowUpdate, maxPerUser: nil)
    }

    public func save(_ subscription: Subscription, allowUpdate: Bool, maxPerUser: Int?) async throws -> SaveOutcome {
        try await withCheckedThrowingContinuation { continuation in
            let leads = saves.withLock { queue -> Bool in
                queue.waiting.append(.init(subscription: subscription, allowUpdate: allowUpdate, maxPerUser: maxPerUser, continuation: continuation))
                if queue.committing { return false }
                queue.committing = true
                return true
            }
            if leads { Task { await self.commitSaves() } }
        }
    }

    /// Commits the waiting saves, group after group, until none waits.
    func commitSaves() async {
        while true {
            let group = saves.withLock { queue -> [SaveQueue.Waiting] in
                let group = queue.waiting
                queue.waiting.removeAll()
                if group.isEmpty { queue.committing = false }
                return group
            }
            if group.isEmpty { return }
            let items = group.map { ($0.subscription, $0.allowUpdate, $0.maxPerUser) }
            do {
                let outcomes = try await durableWrite { db in
                    items.map { subscription, allowUpdate, maxPerUser -> Result<SaveOutcome, any Error> in
                        do {
                            var outcome: SaveOutcome?
                            try db.inSavepoint {
                                outcome = try Self.save(db, subscription, allowUpdate: allowUpdate, maxPerUser: maxPerUser)
                                return .commit
                            }
                            return .success(outcome!)
                        } catch {
                            return .failure(Self.storeError(error, subscriptionID: subscription.id))
                        }
                    }
                }
                for (waiting, outcome) in zip(group, outcomes) { waiting.continuation.resume(with: outcome) }
            } catch {
                for waiting in group { waiting.continuation.resume(throwing: Self.storeError(error, subscriptionID: waiting.subscription.id)) }
            }
        }
    }

    /// One save, inside the caller's transaction.
    static func save(_ db: Database, _ subscription: Subscription, allowUpdate: Bool, maxPerUser: Int?) throws -> SaveOutcome {
        // Cached statements: creates are the API's hot path, and preparing these each time
        // (parse, plan, authorizer) costs more than running them.
        if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.subscriptionColumns) FROM subscription WHERE id = ?"), arguments: [subscription.id]) {
            let existing = try Self.subscription(row)
            guard allowUpdate else { return .conflict(existing) }
            try db.cachedStatement(sql: "UPDATE subscription SET mode = ?, format = ?, encryption = ?, expires_at = ?, auth = ? WHERE handle = ?")
                .execute(arguments: [
                    subscription.mode.rawValue, subscription.format.rawValue, subscription.encryption.map { $0.json.description },
                    subscription.expiresAt, subscription.authText, existing.handle,
                ])
            var refreshed = subscription
            refreshed.handle = existing.handle
            refreshed.createdAt = existing.createdAt
            return .refreshed(refreshed)
        }
        let tuple = subscription.tuple
        if let maxPerUser {
            // Counted up to the limit only: a user far over it (created before the limit, or
            // by an import) costs the limit's rows, not all of theirs.
            let count = try Int.fetchOne(
                db.cachedStatement(sql: "SELECT count(*) FROM (SELECT 1 FROM subscription WHERE app = ? AND uid = ? LIMIT ?)"),
                arguments: [tuple.app, tuple.uid, maxPerUser]) ?? 0
            if count >= maxPerUser { return .tooMany(count: count) }
        }
        try db.cachedStatement(
            sql: """
                INSERT INTO subscription (id, app, uid, kind, destination, path, context, mode, format, encryption,
                                          created_at, expires_at, auth)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(
            arguments: [
                subscription.id, tuple.app, tuple.uid, tuple.kind.rawValue, tuple.destination ?? "", tuple.path.string,
                tuple.context ?? "", subscription.mode.rawValue, subscription.format.rawValue,
                subscription.encryption.map { $0.json.description }, subscription.createdAt, subscription.expiresAt, subscription.authText,
            ])
        var created = subscription
        created.handle = db.lastInsertedRowID
        return .created(created)
    }

    /// Inserts many new subscriptions in one transaction (imports, benchmarks); a tuple that
    /// exists already fails the whole call.
    public func insert(_ subscriptions: [Subscription]) async throws {
        try await write { db in
            let statement = try db.cachedStatement(
                sql: """
                    INSERT INTO subscription (id, app, uid, kind, destination, path, context, mode, format, encryption,
                                              created_at, expires_at, auth)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            for subscription in subscriptions {
                let tuple = subscription.tuple
                try statement.execute(arguments: [
                    subscription.id, tuple.app, tuple.uid, tuple.kind.rawValue, tuple.destination ?? "", tuple.path.string,
                    tuple.context ?? "", subscription.mode.rawValue, subscription.format.rawValue,
                    subscription.encryption.map { $0.json.description }, subscription.createdAt, subscription.expiresAt, subscription.authText,
                ])
            }
        }
    }

    public func subscription(app: String, uid: String, id: String) async throws -> Subscription? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.subscriptionColumns) FROM subscription WHERE id = ? AND app = ? AND uid = ?", arguments: [id, app, uid])
                .map(Self.subscription)
        }
    }

    public func subscription(id: String) async throws -> Subscription? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.subscriptionColumns) FROM subscription WHERE id = ?", arguments: [id]).map(Self.subscription)
        }
    }

    public func subscriptions(app: String, uid: String) async throws -> [Subscription] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.subscriptionColumns) FROM subscription WHERE app = ? AND uid = ? ORDER BY id", arguments: [app, uid])
                .map(Self.subscription)
        }
    }

    /// A page of an application's subscriptions after a handle (`+app`: see below).
    static let applicationPage = "SELECT \(SQLiteStore.subscriptionColumns) FROM subscription WHERE +app = ? AND handle > ? ORDER BY handle LIMIT ?"

    public func subscriptions(app: String?, after handle: Int64, limit: Int) async throws -> [Subscription] {
        try await read { db in
            let rows: [Row]
            if let app {
                // `+app`: read along the primary key from `handle`, filtering by application. With
                // the application's index (`subscription_by_owner`) SQLite took every subscription
                // of the application and sorted them, for each page: the start-up's rules audit of
                // 1,000,000 subscriptions took ~4 minutes of a core (240 ms a page; 6 ms now).
                rows = try Row.fetchAll(db, sql: Self.applicationPage, arguments: [app, handle, limit])
            } else {
                rows = try Row.fetchAll(
                    db, sql: "SELECT \(Self.subscriptionColumns) FROM subscription WHERE handle > ? ORDER BY handle LIMIT ?", arguments: [handle, limit])
            }
            return try rows.map(Self.subscription)
        }
    }

    public func remove(app: String, uid: String, id: String) async throws -> Subscription? {
        try await write { db in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT \(Self.subscriptionColumns) FROM subscription WHERE id = ? AND app = ? AND uid = ?", arguments: [id, app, uid])
            else { return nil }
            let subscription = try Self.subscription(row)
            try db.execute(sql: "DELETE FROM subscription WHERE handle = ?", arguments: [subscription.handle])
            return subscription
        }
    }

    public func updateExpiration(app: String, uid: String, id: String, expiresAt: Int64, auth: JSON?) async throws -> Subscription? {
        try await write(subscriptionID: id) { db in
            try db.execute(
                sql: "UPDATE subscription SET expires_at = ?, auth = ? WHERE id = ? AND app = ? AND uid = ?",
                arguments: [expiresAt, auth.map { $0.description }, id, app, uid])
            guard db.changesCount > 0 else { return nil }
            return try Row.fetchOne(db, sql: "SELECT \(Self.subscriptionColumns) FROM subscription WHERE id = ?", arguments: [id]).map(Self.subscription)
        }
    }

    public func countByKind() async throws -> [SubscriptionKind: Int] {
        try await read { db in
            var counts: [SubscriptionKind: Int] = [:]
            // The counts its triggers keep (not a count of the table).
            for row in try Row.fetchAll(db, sql: "SELECT substr(name, 14) AS kind, value FROM tally WHERE name LIKE 'subscription:%'") {
                if let kind = SubscriptionKind(rawValue: row["kind"]), let value = row["value"] as Int?, value > 0 { counts[kind] = value }
            }
            return counts
        }
    }

    // MARK: - Index support

    public func indexRecords(after handle: Int64, limit: Int) async throws -> [IndexRecord] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT handle, app, path, mode FROM subscription WHERE handle > ? ORDER BY handle LIMIT ?",
                arguments: [handle, limit]
            ).map { row in
                IndexRecord(handle: row["handle"], app: row["app"], path: try Self.path(row["path"]), mode: try Self.mode(row["mode"]))
            }
        }
    }

    public func changes(after sequence: Int64, limit: Int) async throws -> [SubscriptionChange] {
        try await read { db in
            // Cached statements: every create reads the log (read-your-writes).
            let pruned = try Int64.fetchOne(db.cachedStatement(sql: "SELECT pruned_through FROM change_log_state WHERE id = 1")) ?? 0
            if sequence < pruned { throw StoreError.changeLogPruned(through: pruned) }
            // Columns by position: a lookup by name lowercases the name, per row and column.
            return try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT sequence, operation, handle, app, path, mode FROM subscription_change WHERE sequence > ? ORDER BY sequence LIMIT ?"),
                arguments: [sequence, limit]
            ).map { row in
                guard let operation = SubscriptionChange.Operation(rawValue: row[1]) else {
                    throw StoreError.corrupt("unknown change operation \(String(describing: row[1] as String?))")
                }
                return SubscriptionChange(
                    sequence: row[0], operation: operation, handle: row[2], app: row[3], path: try Self.path(row[4]), mode: try Self.mode(row[5]))
            }
        }
    }

    public func lastChange() async throws -> Int64 {
        try await read { db in
            // sqlite_sequence keeps the last AUTOINCREMENT value even after pruning.
            try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'subscription_change'") ?? 0
        }
    }

    public func pruneChanges(through sequence: Int64) async throws {
        try await write { db in
            let last = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'subscription_change'") ?? 0
            let through = min(sequence, last)
            guard through > 0 else { return }
            try db.execute(sql: "DELETE FROM subscription_change WHERE sequence <= ?", arguments: [through])
            try db.execute(
                sql: "UPDATE change_log_state SET pruned_through = max(pruned_through, ?) WHERE id = 1", arguments: [through])
        }
    }

    // MARK: - Service keys

    public func loadServiceKeys() async throws -> [JSON] {
        let texts = try await read { db in
            try String.fetchAll(db, sql: "SELECT jwk FROM service_key ORDER BY created_at, rowid")
        }
        return try texts.map { try Self.parse($0, what: "a service key") }
    }

    public func createServiceKeyIfNone(_ jwk: JSON, kid: String) async throws -> [JSON] {
        // One immediate write transaction: of two processes starting together, the second sees
        // the first one's key.
        let texts = try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO service_key (kid, jwk, created_at)
                    SELECT ?, ?, CAST(strftime('%s', 'now') AS INTEGER) WHERE NOT EXISTS (SELECT 1 FROM service_key)
                    """,
                arguments: [kid, jwk.description])
            return try String.fetchAll(db, sql: "SELECT jwk FROM service_key ORDER BY created_at, rowid")
        }
        return try texts.map { try Self.parse($0, what: "a service key") }
    }

    // MARK: - Plumbing

    func write<T: Sendable>(subscriptionID: String? = nil, _ body: @escaping @Sendable (Database) throws -> T) async throws
        -> T
    {
        do {
            return try await durableWrite(body)
        } catch {
            throw Self.storeError(error, subscriptionID: subscriptionID)
        }
    }

    /// One transaction committed with `synchronous = FULL` (the writer's setting, set back first
    /// if a relaxed write could not).
    func durableWrite<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await pool.writeWithoutTransaction { db in
            if self.relaxed.withLock({ $0 }) {
                try db.cachedStatement(sql: "PRAGMA synchronous = FULL").execute()
                self.relaxed.withLock { $0 = false }
            }
            return try Self.transaction(db, body)
        }
    }

    /// One transaction committed with `synchronous = NORMAL`: written to the WAL, not waited
    /// for on the disk. For the dispatcher's claims and settlements only, whose loss in a power
    /// cut (never in a crash of the process: the WAL is in the system's cache) repeats work
    /// without losing any: SQLite's claims are all given back at start, and a settlement lost
    /// means its notification is sent again, as one in flight at a crash is (SPEC §4,
    /// `docs/durability.md`). The next durable commit's `fdatasync` carries these frames too.
    /// Every other write stays `FULL`: records and subscriptions are acknowledged to others.
    func writeRelaxed<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await pool.writeWithoutTransaction { db in
                self.relaxed.withLock { $0 = true }
                try db.cachedStatement(sql: "PRAGMA synchronous = NORMAL").execute()
                let result = Result { try Self.transaction(db, body) }
                // The transaction's outcome is its caller's even when this fails: the flag
                // stays set, and the next durable write sets FULL (or fails) before it commits.
                if (try? db.cachedStatement(sql: "PRAGMA synchronous = FULL").execute()) != nil {
                    self.relaxed.withLock { $0 = false }
                }
                return try result.get()
            }
        } catch {
            throw Self.storeError(error, subscriptionID: nil)
        }
    }

    /// `body` in a transaction, committed unless it throws.
    static func transaction<T>(_ db: Database, _ body: (Database) throws -> T) throws -> T {
        var result: T?
        try db.inTransaction {
            result = try body(db)
            return .commit
        }
        return result!
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await pool.read(body)
        } catch {
            throw Self.storeError(error, subscriptionID: nil)
        }
    }

    /// A failure as a typed ``StoreError``.
    static func storeError(_ error: any Error, subscriptionID: String?) -> StoreError {
        if let error = error as? StoreError { return error }
        if let error = error as? RequestError {
            return StoreError.corrupt(error.message, subscriptionID: subscriptionID)
        }
        guard let error = error as? DatabaseError else {
            return StoreError.unavailable(String(describing: error), subscriptionID: subscriptionID)
        }
        switch error.resultCode {
        case .SQLITE_CONSTRAINT:
            if error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE, error.message?.contains("subscription.id") == true {
                return StoreError.duplicate(subscriptionID: subscriptionID)
            }
            return StoreError.constraint(error.message ?? "a constraint failed", subscriptionID: subscriptionID)
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return StoreError.busy(subscriptionID: subscriptionID)
        default:
            return StoreError.unavailable(reason(error), subscriptionID: subscriptionID)
        }
    }

    /// An SQLite failure in a few words (GRDB's description includes the SQL and its arguments).
    static func reason(_ error: any Error) -> String {
        guard let error = error as? DatabaseError else { return String(describing: error) }
        return "\(error.message ?? "SQLite error") (code \(error.extendedResultCode.rawValue))"
    }

    static func parse(_ text: String, what: String) throws -> JSON {
        do {
            return try JSONParser.parse(text)
        } catch {
            throw StoreError.corrupt("\(what) is not JSON: \(error)")
        }
    }

    /// The columns ``subscription(_:)`` reads, in its order. Rows are decoded by position:
    /// GRDB's lookup by name lowercases the name for every column of every row, and an
    /// ingestion whose subscriptions are not in the registry's cache reads one row per
    /// notification (at 5,000 records a second to 100,000 devices, the by-name decoding was
    /// ~4 % of the service's CPU).
    static let subscriptionColumns = "handle, id, app, uid, kind, destination, path, context, mode, format, encryption, created_at, expires_at, auth"

    /// A subscription from a row of ``subscriptionColumns``.
    static func subscription(_ row: Row) throws -> Subscription {
        let id: String = row[1]
        guard let kind = SubscriptionKind(rawValue: row[4]), let format = PayloadFormat(rawValue: row[9]) else {
            throw StoreError.corrupt("a subscription row has an unknown kind or format", subscriptionID: id)
        }
        var encryption: EncryptionSpec?
        if let text: String = row[10] {
            do {
                encryption = try EncryptionSpec.decode(try parse(text, what: "encryption"), field: "encryption")
            } catch let error as RequestError {
                throw StoreError.corrupt(error.message, subscriptionID: id)
            }
        }
        let destination: String = row[5]
        let context: String = row[7]
        let authText: String? = row[13]
        return Subscription(
            id: id,
            tuple: SubscriptionTuple(
                app: row[2], uid: row[3], kind: kind, destination: destination.isEmpty ? nil : destination,
                path: try path(row[6]), context: kind != .webhook || !context.isEmpty ? context : nil),
            mode: try mode(row[8]), format: format, encryption: encryption, createdAt: row[11],
            expiresAt: row[12], handle: row[0], auth: try authText.map { try parse($0, what: "auth") })
    }

    static func path(_ text: String) throws -> Path {
        do {
            return try Path(text)
        } catch {
            throw StoreError.corrupt("stored path \(JSONWriter.quoted(text)) is invalid: \(error)")
        }
    }

    static func mode(_ text: String) throws -> Mode {
        guard let mode = Mode(rawValue: text) else { throw StoreError.corrupt("stored mode \(JSONWriter.quoted(text)) is unknown") }
        return mode
    }
}

