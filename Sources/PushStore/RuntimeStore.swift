import PushCore
import PushJOSE
import PushContracts

/// What the service runs on: every store protocol, and what operators ask of a store.
public protocol RuntimeStore: SubscriptionStore, ServiceKeyStore, IngestStore, DeliveryStore, HistoryStore {
    /// `SQLite` or `PostgreSQL`.
    var engineName: String { get }
    /// The file or the database, without secrets.
    var location: String { get }
    /// The schema version applied (the number of migrations).
    func schemaVersion() async throws -> Int
    /// The largest subscription handle ever handed out (handles are never reused).
    func handleHighWater() async throws -> Int64
    /// Releases the connections (queries after this fail).
    func close()
    /// Sets a source's last accepted `seq` (`nil`: none, the next `seq` is accepted whatever
    /// it is), keeping its position: an operator's way out of a watermark a bad record moved
    /// out of reach. Returns whether the source was there.
    func resetWatermark(source: String, lastSeq: Int64?) async throws -> Bool
}

/// A store several instances share: every store protocol and the cluster's.
public protocol SharedStore: RuntimeStore, ClusterStore {}

extension SQLiteStore: RuntimeStore {
    public var engineName: String { "SQLite" }
    public var location: String { path }
    /// GRDB closes the database with the store.
    public func close() {}
}

extension PostgresStore: SharedStore {
    public var engineName: String { "PostgreSQL" }

    public func handleHighWater() async throws -> Int64 {
        var high: Int64 = 0
        try await run { session in
            let rows = try await session.query(
                "SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('subscription', 'handle')), 0)::bigint")
            for try await value in rows.decode(Int64.self) { high = value }
        }
        return high
    }
}
