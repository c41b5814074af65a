import Foundation
import Logging
import PushCore
import PushContracts
import PushEngine
import PushJOSE
@testable import PushService
import PushStore
import PushTestSupport
import Testing

/// Moving from SQLite to PostgreSQL: export, import, nothing lost; a bad file refused with
/// the line and what was expected, whatever its damage.
@Suite("Export and import (SQLite → PostgreSQL)", .processLevel)
struct StoreTransferTests {
    static let logger = Logger(label: "transfer-test", factory: { _ in SwiftLogNoOpLogHandler() })

    func subscription(_ n: Int, mode: Mode = .childEvent) -> Subscription {
        let tuple = SubscriptionTuple(app: "toto", uid: "u\(n)", kind: .fcm, destination: nil, path: try! Path("/a/\(n)"), context: "token-\(n)")
        return Subscription(
            id: SubscriptionID.derive(tuple), tuple: tuple, mode: mode, format: .v2, encryption: nil, createdAt: 1_700_000_000 + Int64(n),
            expiresAt: 2_000_000_000)
    }

    /// An SQLite store with a bit of everything; its export.
    func exported() async throws -> (SQLiteStore, [UInt8]) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-transfer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let store = try SQLiteStore(path: folder.appendingPathComponent("store.db").path)
        _ = try await ServiceKey.loadOrCreate(in: store)
        var handles: [Int64] = []
        for n in 0..<5 {
            guard case .created(let created) = try await store.save(subscription(n), allowUpdate: false) else { throw StoreError.corrupt("not created") }
            handles.append(created.handle!)
        }
        // The largest handle deleted: not to be handed out again after the move.
        _ = try await store.remove(app: "toto", uid: "u4", id: subscription(4).id)
        var batch = CommitBatch(now: 1_000)
        batch.journal = ["toto": Array(#"{"seq":1,"app":"toto","op":"put","path":"/a","data":{"x":1}}"#.utf8) + [10]]
        batch.checkpoints = [SourceCheckpoint(source: "queue-file", lastSeq: 1, position: 60, fileIdentity: "1:2")]
        batch.operations = (0..<3).map { n in
            .notify(
                OutboxEntry(
                    app: "toto", subscriptionHandle: handles[n], subscriptionID: subscription(n).id, kind: .fcm, target: "token-\(n)",
                    destination: nil, notification: .childEvent, payload: Array("payload-\(n) \u{1}".utf8), recordSeq: 1))
        }
        _ = try await store.commit(batch)
        var bytes: [UInt8] = []
        _ = try await StoreTransfer.export(store) { bytes += $0 + [10] }
        return (store, bytes)
    }

    @Test("everything an SQLite store holds arrives in PostgreSQL; handles go on above the old ones",
          .enabled(if: PostgresTestServer.enabled))
    func roundTrip() async throws {
        let (sqlite, bytes) = try await exported()
        let (contents, counts) = try StoreTransfer.parse(bytes, machine: "node-1")
        #expect(counts.subscriptions == 4 && counts.serviceKeys == 1 && counts.trees == 1 && counts.checkpoints == 1 && counts.notifications == 3)
        let url = try PostgresTestServer.shared.get().createDatabase()
        let postgres = try await PostgresStore.open(url: url, logger: Self.logger)
        defer { postgres.close() }
        try await postgres.importContents(contents)

        #expect(try await postgres.subscriptions(app: nil, after: 0, limit: 100) == (try await sqlite.subscriptions(app: nil, after: 0, limit: 100)))
        #expect(try await postgres.loadServiceKeys() == (try await sqlite.loadServiceKeys()))
        #expect(try await postgres.checkpoints() == [SourceCheckpoint(source: "node-1/queue-file", lastSeq: 1, position: 60, fileIdentity: "1:2")])
        let tree = try await TreeLoader.tree(app: "toto", from: postgres).tree
        #expect(tree.root?.description == #"{"a":{"x":1}}"#)
        let moved = try await postgres.notifications(limit: 10)
        let original = try await sqlite.notifications(limit: 10)
        #expect(moved.map(\.entry) == original.map(\.entry))
        #expect(moved.map(\.createdAt) == original.map(\.createdAt))
        // Handle 5 was used (and deleted): the next one is above it.
        guard case .created(let created) = try await postgres.save(subscription(9), allowUpdate: false) else {
            Issue.record("not created")
            return
        }
        #expect(created.handle == 6)
        // A database holding data already is refused, and keeps what it held.
        await #expect(throws: StoreError.self) { try await postgres.importContents(contents) }
        #expect(try await postgres.subscriptions(app: nil, after: 0, limit: 100).count == 5)
    }

    @Test("a cut, edited or foreign file is refused with the line and what was expected")
    func refusals() async throws {
        let (_, bytes) = try await exported()
        let lines: [[UInt8]] = bytes.split(separator: 10).map { Array($0) }
        func joined(_ lines: [[UInt8]]) -> [UInt8] { lines.flatMap { $0 + [10] } }
        func refused(_ damaged: [UInt8]) -> String? {
            do {
                _ = try StoreTransfer.parse(damaged, machine: "node-1")
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(refused(joined(Array(lines.dropLast())))?.contains("without its end line") == true)
        #expect(refused(joined(Array(lines.dropFirst())))?.contains("line 1: not a pushdispatch export") == true)
        let withoutSubscription = joined(lines.enumerated().filter { $0.offset != 3 }.map(\.element))
        #expect(refused(withoutSubscription)?.contains("incomplete or was edited") == true)
        #expect(refused([])?.contains("empty") == true)
        // A line given twice would make an import keep one silently: refused where it repeats.
        for type in [#""type":"checkpoint""#, #""type":"tree""#] {
            let index = try #require(lines.firstIndex { String(decoding: $0, as: UTF8.self).contains(type) }, "no \(type) line")
            let twice = joined(Array(lines[...index]) + [lines[index]] + Array(lines[(index + 1)...]))
            #expect(refused(twice)?.contains("line \(index + 2): a second") == true, "\(type): \(refused(twice) ?? "accepted")")
        }

        // Seeded mutations: never a crash; a refusal says where, or the file still parses.
        for seed in UInt64(1)...300 {
            var mutator = Mutator(seed: seed)
            let damaged = mutator.mutateBytes(bytes)
            if let message = refused(damaged) {
                #expect(message.hasPrefix("line ") || message.contains("end line") || message.contains("empty"), "seed \(seed): \(message)")
            }
        }
    }
}
