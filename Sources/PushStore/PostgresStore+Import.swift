import Foundation
import GRDB
import PostgresNIO
import PushCore
import PushContracts
import PushJSON

/// What `pushdispatch import` carries into a fresh PostgreSQL database.
public struct StoreContents: Sendable {
    /// Private JWKs (JSON text), oldest first: the last one signs.
    public var serviceKeys: [String] = []
    /// Every handle up to this was used by the source store: none is handed out again.
    public var handleHighWater: Int64 = 0
    /// With their handles (notifications name them).
    public var subscriptions: [Subscription] = []
    /// Each application's tree as compact JSON.
    public var trees: [(app: String, tree: [UInt8])] = []
    public var checkpoints: [SourceCheckpoint] = []
    /// Waiting notifications, in their order (claims are not carried).
    public var notifications: [StoredNotification] = []

    public init() {}
}

extension PostgresStore {
    /// Removes everything of application `app` (subscriptions, notifications, tree) and the
    /// checkpoint of `source`, in one transaction: a benchmark's clean-up on a scratch database.
    public func removeApplication(_ app: String, source: String) async throws {
        try await transaction(writerLock: true) { connection in
            try await connection.query("DELETE FROM notification WHERE app = \(app)", logger: self.logger)
            try await connection.query("DELETE FROM tree_journal WHERE app = \(app)", logger: self.logger)
            try await connection.query("DELETE FROM tree_snapshot WHERE app = \(app)", logger: self.logger)
            try await connection.query("DELETE FROM tree_head WHERE app = \(app)", logger: self.logger)
            try await connection.query("DELETE FROM source_checkpoint WHERE source = \(source)", logger: self.logger)
            try await connection.query("DELETE FROM subscription WHERE app = \(app)", logger: self.logger)
        }
    }

    /// Inserts many new subscriptions in one transaction (benchmarks), as SQLite's
    /// ``SQLiteStore/insert(_:)``; a tuple that exists already fails the whole call.
    public func insert(_ subscriptions: [Subscription]) async throws {
        try await transaction(writerLock: true) { connection in
            try await Self.insert(subscriptions, keepingHandles: false, on: connection, logger: self.logger)
        }
    }

    /// Inserts subscriptions 1,000 to a statement; with their own handles when
    /// `keepingHandles` (an import), else with new ones.
    static func insert(_ subscriptions: [Subscription], keepingHandles: Bool, on connection: PostgresSession, logger: Logger) async throws {
        for chunk in subscriptions.chunks(of: 1_000) {
            let handleColumn = keepingHandles ? "handle, " : ""
            let handleValue = keepingHandles ? "h, " : ""
            let overriding = keepingHandles ? "OVERRIDING SYSTEM VALUE" : ""
            try await connection.query(
                """
                INSERT INTO subscription (\(unescaped: handleColumn)id, app, uid, kind, destination, path, context, mode, format, encryption,
                                          created_at, expires_at, auth)
                \(unescaped: overriding)
                SELECT \(unescaped: handleValue)i, a, u, k, d, p, c, m, f, nullif(e, ''), ca, ea, nullif(au, '')
                FROM unnest(\(chunk.map { $0.handle ?? 0 })::bigint[], \(chunk.map(\.id))::text[], \(chunk.map(\.app))::text[],
                            \(chunk.map(\.uid))::text[], \(chunk.map(\.kind.rawValue))::text[],
                            \(chunk.map { $0.tuple.destination ?? "" })::text[], \(chunk.map(\.path.string))::text[],
                            \(chunk.map { $0.tuple.context ?? "" })::text[], \(chunk.map(\.mode.rawValue))::text[],
                            \(chunk.map(\.format.rawValue))::text[], \(chunk.map { $0.encryption?.json.description ?? "" })::text[],
                            \(chunk.map(\.createdAt))::bigint[], \(chunk.map(\.expiresAt))::bigint[],
                            \(chunk.map { $0.authText ?? "" })::text[])
                     AS s(h, i, a, u, k, d, p, c, m, f, e, ca, ea, au)
                """, logger: logger)
        }
    }

    /// Loads `contents` into this database in one transaction: all of it or nothing. Refuses
    /// a database that already holds subscriptions, notifications, trees or service keys.
    public func importContents(_ contents: StoreContents) async throws {
        try await transaction(writerLock: true) { connection in
            for table in ["subscription", "notification", "tree_journal", "tree_head", "service_key", "inbox"] {
                var count: Int64 = 0
                for try await value in try await connection.query(
                    PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table)"), logger: self.logger
                ).decode(Int64.self) { count = value }
                if count > 0 {
                    throw StoreError.constraint("the database already holds data (table \(table)); import into a fresh database")
                }
            }
            for (index, jwk) in contents.serviceKeys.enumerated() {
                let kid = (try? JSONParser.parse(Array(jwk.utf8)))?["kid"]?.stringValue ?? "imported-\(index)"
                try await connection.query(
                    "INSERT INTO service_key (kid, jwk, created_at) VALUES (\(kid), \(jwk), \(Int64(index)))", logger: self.logger)
            }
            try await Self.insert(contents.subscriptions, keepingHandles: true, on: connection, logger: self.logger)
            // Handles go on above every one the source store used.
            _ = try await connection.query(
                """
                SELECT setval(pg_get_serial_sequence('subscription', 'handle'),
                              greatest(\(contents.handleHighWater), (SELECT coalesce(max(handle), 0) FROM subscription), 1))
                """, logger: self.logger
            ).collect()
            for (app, tree) in contents.trees {
                var chunks: Int64 = 0
                var offset = 0
                repeat {
                    let end = min(tree.count, offset + Self.snapshotChunkBytes)
                    try await connection.query(
                        "INSERT INTO tree_snapshot (app, generation, chunk, bytes) VALUES (\(app), 1, \(chunks), \(ByteBuffer(bytes: tree[offset..<end])))",
                        logger: self.logger)
                    chunks += 1
                    offset = end
                } while offset < tree.count
                try await connection.query(
                    "INSERT INTO tree_head (app, generation, chunks, through_journal) VALUES (\(app), 1, \(chunks), 0)", logger: self.logger)
            }
            try await Self.store(contents.checkpoints, on: connection, logger: self.logger)
            for notification in contents.notifications {
                let entry = notification.entry
                try await connection.query(
                    """
                    INSERT INTO notification (app, subscription_handle, subscription_id, kind, target, destination, event, coalescable,
                                              payload, record_seq, created_at, next_attempt_at, first_attempt_at, attempts)
                    VALUES (\(entry.app), \(entry.subscriptionHandle), \(entry.subscriptionID), \(entry.kind.rawValue), \(entry.target),
                            \(entry.destination), \(entry.notification.rawValue), \(entry.notification.coalesces),
                            \(ByteBuffer(bytes: entry.payload)), \(entry.recordSeq), \(notification.createdAt), \(notification.nextAttemptAt),
                            \(notification.firstAttemptAt), \(Int64(notification.attempts)))
                    """, logger: self.logger)
            }
        }
    }
}

extension Array {
    /// Consecutive slices of at most `size` elements.
    func chunks(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min(count, $0 + size)] }
    }
}

extension SQLiteStore {
    /// The largest subscription handle this store ever handed out (AUTOINCREMENT's record).
    public func handleHighWater() async throws -> Int64 {
        try await read { db in
            try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'subscription'") ?? 0
        }
    }
}

extension PostgresStore {
    /// Queues notifications in bulk, created and due at `now` (benchmarks: one statement per
    /// thousand rows, no coalescing, no subscription check).
    public func fillOutbox(_ entries: [OutboxEntry], now: Int64) async throws {
        try await transaction(writerLock: false) { connection in
            for chunk in entries.chunks(of: 1_000) {
                try await connection.query(
                    """
                    INSERT INTO notification (app, subscription_handle, subscription_id, kind, target, destination, event, coalescable,
                                              payload, record_seq, created_at, next_attempt_at)
                    SELECT a, h, i, k, t, NULL, e, e IN ('value', 'noData'), decode(p, 'base64'), 1, \(now), \(now)
                    FROM unnest(\(chunk.map(\.app))::text[], \(chunk.map(\.subscriptionHandle))::bigint[], \(chunk.map(\.subscriptionID))::text[],
                                \(chunk.map(\.kind.rawValue))::text[], \(chunk.map { $0.target ?? "" })::text[],
                                \(chunk.map(\.notification.rawValue))::text[], \(chunk.map { Data($0.payload).base64EncodedString() })::text[])
                         WITH ORDINALITY AS n(a, h, i, k, t, e, p, o)
                    ORDER BY o
                    """, logger: self.logger)
            }
        }
    }
}
