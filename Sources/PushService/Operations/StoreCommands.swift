import Foundation
import Logging
import PushCore
import PushContracts
import PushEngine
import PushStore

#if canImport(Glibc)
import Glibc
#endif

/// What the operator's store commands do (`migrate`, `export`, `import`, `subscriptions`): the
/// executable parses their arguments and calls these.
public enum StoreCommands {
    /// Opens the configured store for a command, migrating its schema. Commands work beside a
    /// running service: they take no deployment lock.
    public static func open(_ configuration: ServiceConfiguration, logger: Logger = quietLogger()) async throws -> any RuntimeStore {
        try await Deployments.openStore(configuration, logger: logger)
    }

    /// Every source's checkpoint: what `pushdispatch checkpoints` lists.
    public static func checkpoints(_ configuration: ServiceConfiguration) async throws -> [SourceCheckpoint] {
        let store = try await open(configuration)
        defer { store.close() }
        return try await store.checkpoints()
    }

    /// Sets a source's watermark (`nil`: none). Refused while a service reads the store: it
    /// keeps the watermarks in memory and would go on from its own. SQLite: the database's lock
    /// is free; PostgreSQL: no instance's heartbeat is live.
    public static func resetWatermark(_ configuration: ServiceConfiguration, source: String, lastSeq: Int64?) async throws {
        let store: any RuntimeStore
        var lock: ProcessLock?
        switch configuration.store {
        case .sqlite(let path):
            do {
                lock = try SQLiteFiles.lock(path)
            } catch {
                throw CheckpointError(description: "\(error); stop the service first (it keeps the watermarks in memory)")
            }
            store = try SQLiteStore(path: path)
        case .postgres(let url):
            let postgres = try await PostgresStore.open(url: url, logger: quietLogger())
            store = postgres
            let live = try await postgres.instances(within: SharedInstances.leaseTTL)
            guard live.isEmpty else {
                postgres.close()
                throw CheckpointError(
                    description: "instances are running on this database (\(live.map(\.name).joined(separator: ", "))); stop every instance "
                        + "first (each keeps the watermarks in memory)")
            }
        }
        defer {
            store.close()
            withExtendedLifetime(lock) {}
        }
        guard try await store.resetWatermark(source: source, lastSeq: lastSeq) else {
            let known = try await store.checkpoints().map(\.source)
            throw CheckpointError(description: "no source \(source); the store has: \(known.isEmpty ? "none" : known.joined(separator: ", "))")
        }
    }

    /// Migrates the configured store; says where it stands (`SQLite ./pushdispatch.db: schema
    /// version 3`).
    public static func migrate(_ configuration: ServiceConfiguration) async throws -> String {
        let store = try await open(configuration)
        defer { store.close() }
        return "\(store.engineName) \(store.location): schema version \(try await store.schemaVersion())"
    }

    /// Writes the configured store's durable state to `output`, a new file readable by its
    /// owner only (it holds the service's private keys), synced before it returns; on failure
    /// the file is removed. Returns what was written.
    public static func export(_ configuration: ServiceConfiguration, to output: String) async throws -> StoreTransfer.Counts {
        let descriptor = Glibc.open(output, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let exists = errno == EEXIST
            throw TransferError(.file, "cannot create \(output): \(String(cString: strerror(errno)))\(exists ? " (it exists; export to a new file)" : "")")
        }
        defer { close(descriptor) }
        do {
            let store = try await open(configuration)
            defer { store.close() }
            var buffer = OutputBuffer(descriptor: descriptor)
            let counts = try await StoreTransfer.export(store) { line in
                buffer.bytes += line
                buffer.bytes.append(UInt8(ascii: "\n"))
                if buffer.bytes.count > 1 << 20 { try buffer.flush() }
            }
            try buffer.flush()
            guard fsync(descriptor) == 0 else { throw TransferError(.file, "cannot sync \(output): \(String(cString: strerror(errno)))") }
            return counts
        } catch {
            unlink(output)
            throw error
        }
    }

    /// Loads an export file into the configured PostgreSQL store, all of it or nothing.
    /// A queue file's checkpoint is filed under the configuration's pinned `instance.name` (or
    /// the host name), the socket's under `socket`, shared by every instance.
    public static func `import`(_ configuration: ServiceConfiguration, from input: String) async throws -> (counts: StoreTransfer.Counts, location: String) {
        guard case .postgres(let url) = configuration.store else {
            throw TransferError(.notPostgreSQL, "import fills a PostgreSQL store; the configuration names store.sqlite")
        }
        guard let data = FileManager.default.contents(atPath: input) else {
            throw TransferError(.file, "cannot read the export \(input): no such file or not readable")
        }
        let (contents, counts) = try StoreTransfer.parse([UInt8](data), machine: configuration.machineName)
        let store = try await PostgresStore.open(url: url, logger: quietLogger())
        defer { store.close() }
        try await store.importContents(contents)
        return (counts, store.location)
    }

    /// The subscriptions of the configured store (of `app`, of `app` and `uid`, or all), page
    /// by page, oldest first (by `uid`: in id order).
    public static func subscriptions(
        _ configuration: ServiceConfiguration, app: String?, uid: String?, _ page: ([Subscription]) throws -> Void
    ) async throws {
        let store = try await open(configuration)
        defer { store.close() }
        if let app, let uid {
            try page(try await store.subscriptions(app: app, uid: uid))
            return
        }
        var after: Int64 = 0
        while true {
            let subscriptions = try await store.subscriptions(app: app, after: after, limit: 1_000)
            guard let last = subscriptions.last else { return }
            try page(subscriptions)
            after = last.handle ?? after
        }
    }

    /// One subscription of the configured store, or `nil`.
    public static func subscription(_ configuration: ServiceConfiguration, id: String) async throws -> Subscription? {
        let store = try await open(configuration)
        defer { store.close() }
        return try await store.subscription(id: id)
    }

    /// Removes a subscription (no revoke notification is sent); returns it, or `nil` when there
    /// is none with this id. A running service's index follows within a second.
    public static func remove(_ configuration: ServiceConfiguration, id: String) async throws -> Subscription? {
        let store = try await open(configuration)
        defer { store.close() }
        guard let subscription = try await store.subscription(id: id) else { return nil }
        return try await store.remove(app: subscription.app, uid: subscription.uid, id: id)
    }

    /// A logger that says only warnings and worse (commands print their own results).
    public static func quietLogger() -> Logger {
        var logger = Logger(label: "pushdispatch")
        logger.logLevel = .warning
        return logger
    }
}

/// A checkpoint cannot be reset: why, and what to do.
public struct CheckpointError: Error, CustomStringConvertible {
    public var description: String
}
