import Logging
import PushContracts
import PushCore
import PushJSON
import PushMatching

/// Rebuilds every application's tree at start: its last snapshot, then the journal of the
/// records accepted since (docs/durability.md).
public enum TreeLoader {
    public struct Loaded: Sendable {
        public var processor = RecordProcessor()
        /// Journal bytes since each application's snapshot (the snapshot policy's measure).
        public var journalBytes: [String: Int] = [:]
        /// The last journal row of each application.
        public var journalIDs: [String: Int64] = [:]

        public init() {}
    }

    public static func load(from store: any IngestStore, logger: Logger) async throws -> Loaded {
        var loaded = Loaded()
        let start = ContinuousClock.now
        var records = 0
        var snapshotBytes = 0
        for app in try await store.treeApplications() {
            let one = try await tree(app: app, from: store)
            snapshotBytes += one.snapshotBytes
            records += one.records
            loaded.journalIDs[app] = one.journalID
            loaded.journalBytes[app] = one.journalBytes
            loaded.processor.setTree(one.tree, app: app)
        }
        if !loaded.journalIDs.isEmpty {
            logger.info(
                "trees restored",
                metadata: [
                    "applications": "\(loaded.journalIDs.count)", "snapshotBytes": "\(snapshotBytes)", "journalRecords": "\(records)",
                    "duration": "\(ContinuousClock.now - start)",
                ])
        }
        return loaded
    }

    /// One application's tree: its snapshot, then its journal.
    public static func tree(app: String, from store: any IngestStore) async throws -> (
        tree: DataTree, journalID: Int64, journalBytes: Int, snapshotBytes: Int, records: Int
    ) {
        let stored = try await store.tree(app: app)
        var tree = DataTree()
        if let snapshot = stored.snapshot {
            do {
                let json = try JSONParser.parse(snapshot)
                tree = DataTree(root: json.isNull ? nil : json)
            } catch {
                throw StoreError.corrupt("the snapshot of application \(app) is not JSON: \(error)")
            }
        }
        var bytes = 0
        var records = 0
        var journalID = stored.snapshotThrough
        for row in stored.journal {
            bytes += row.lines.count
            for line in row.lines.split(separator: UInt8(ascii: "\n")) {
                let record: ChangeRecord
                do {
                    record = try ChangeRecord.parse(Array(line))
                } catch {
                    throw StoreError.corrupt("journal row \(row.id) of application \(app) holds a bad record: \(error)")
                }
                if case .write(let write) = record.operation { tree.apply(write) }
                records += 1
            }
            journalID = row.id
        }
        return (tree, journalID, bytes, stored.snapshot?.count ?? 0, records)
    }
}
