import Logging
import PushContracts
import PushCore
import PushJSON
import PushMatching

/// A tree to snapshot: an application's tree as of the journal row `through`.
public struct SnapshotRequest: Sendable {
    public var app: String
    public var tree: DataTree
    public var through: Int64
}

/// Writes tree snapshots (docs/durability.md): the tree serialised, stored in chunks, the
/// journal rows it covers forgotten.
public struct SnapshotWriter: Sendable {
    let store: any IngestStore
    let logger: Logger

    public init(store: any IngestStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    public func write(_ request: SnapshotRequest) async {
        var writer = JSONWriter(capacity: 1 << 20)
        writer.write(request.tree.root ?? .null)
        let bytes = writer.bytes
        try? await retryingIngestion("writing a snapshot", logger: logger) {
            try await store.saveSnapshot(app: request.app, tree: bytes, through: request.through)
        }
        logger.info("tree snapshot written", metadata: ["app": "\(request.app)", "bytes": "\(bytes.count)", "throughJournal": "\(request.through)"])
    }
}
