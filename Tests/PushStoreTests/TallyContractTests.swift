import Foundation
import GRDB
import Logging
import PostgresNIO
import PushCore
import PushContracts
@testable import PushStore
import PushTestSupport
import Testing

/// `/metrics` and `/status` read the counts the store keeps as rows change (migrations SQLite
/// v5, PostgreSQL 3), not counts of whole tables: they must always equal the tables' counts.
@Suite("Store tallies: subscriptions by kind and the outbox depth", .processLevel)
struct TallyContractTests {
    /// `SELECT count(*)` of the store's own tables: what the tallies must say.
    func counted(_ store: any FullStore) async throws -> (kinds: [SubscriptionKind: Int], notifications: Int) {
        var kinds: [SubscriptionKind: Int] = [:]
        var notifications = 0
        if let sqlite = store as? SQLiteStore {
            (kinds, notifications) = try await sqlite.pool.read { db in
                var kinds: [SubscriptionKind: Int] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT kind, count(*) AS n FROM subscription GROUP BY kind") {
                    kinds[SubscriptionKind(rawValue: row["kind"])!] = row["n"]
                }
                return (kinds, try Int.fetchOne(db, sql: "SELECT count(*) FROM notification") ?? 0)
            }
        } else if let postgres = store as? PostgresStore {
            for try await (kind, count) in try await postgres.client.query("SELECT kind, count(*) FROM subscription GROUP BY kind").decode((String, Int64).self) {
                kinds[SubscriptionKind(rawValue: kind)!] = Int(count)
            }
            for try await count in try await postgres.client.query("SELECT count(*) FROM notification").decode(Int64.self) { notifications = Int(count) }
        }
        return (kinds, notifications)
    }

    func execute(_ sql: String, on store: any FullStore) async throws {
        if let sqlite = store as? SQLiteStore {
            try await sqlite.pool.write { db in try db.execute(sql: sql) }
        } else if let postgres = store as? PostgresStore {
            try await postgres.client.query(PostgresQuery(unsafeSQL: sql))
        }
    }

    func expectTallies(_ store: any FullStore, _ when: String) async throws {
        let truth = try await counted(store)
        #expect(try await store.countByKind() == truth.kinds, "\(when)")
        #expect(try await store.outboxDepth().count == truth.notifications, "\(when)")
    }

    @Test("the tallies equal the tables' counts through creates, refreshes, removals, commits, merges and deletes", arguments: StoreKind.all)
    func follows(kind: StoreKind) async throws {
        let (store, reopen) = try await kind.make()
        try await expectTallies(store, "empty")
        var handles: [(Subscription, Int64)] = []
        for index in 0..<30 {
            let kinds: [SubscriptionKind] = [.fcm, .hms, .webhook]
            let subscriptionKind = kinds[index % 3]
            let subscription = makeSubscription(
                uid: "u\(index % 7)", kind: subscriptionKind, path: "/p/\(index)", context: subscriptionKind == .webhook ? nil : "t\(index)",
                destination: subscriptionKind == .webhook ? "orders" : nil, mode: index % 2 == 0 ? .value : .childEvent)
            if case .created(let created) = try await store.save(subscription, allowUpdate: false) { handles.append((subscription, created.handle!)) }
            _ = try await store.save(subscription, allowUpdate: true)  // a refresh counts nothing
        }
        try await expectTallies(store, "after creates and refreshes")
        for round in 1...3 {
            var batch = CommitBatch(now: Int64(round))
            batch.operations = handles.map { subscription, handle in
                .notify(entry(subscription, handle, subscription.mode == .value ? .value : .childEvent, payload: "\(round)"))
            }
            _ = try await store.commit(batch)  // value ones merge into the waiting one
            try await expectTallies(store, "after commit \(round)")
        }
        for (subscription, _) in handles.prefix(5) { _ = try await store.remove(app: subscription.app, uid: subscription.uid, id: subscription.id) }
        try await execute("DELETE FROM notification WHERE id IN (SELECT id FROM notification ORDER BY id LIMIT 7)", on: store)
        try await expectTallies(store, "after removals and deletes")
        // Another handle on the same data (another session on PostgreSQL) reads the same.
        let again = try await reopen()
        try await expectTallies(again, "reopened")
        let depth = try await again.outboxDepth()
        #expect(depth.oldest == 1 || depth.count == 0)
    }

    @Test("PostgreSQL: sessions writing side by side each keep their own rows; rows of ended sessions are folded, the sums unchanged",
        .enabled(if: PostgresTestServer.enabled))
    func concurrentSessions() async throws {
        let url = try PostgresTestServer.shared.get().createDatabase()
        let logger = Logger(label: "postgres-test", factory: { _ in SwiftLogNoOpLogHandler() })
        let stores = try await withThrowingTaskGroup(of: PostgresStore.self) { group in
            for _ in 0..<4 { group.addTask { try await PostgresStore.open(url: url, logger: logger) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (number, store) in stores.enumerated() {
                group.addTask {
                    for index in 0..<40 {
                        let subscription = makeSubscription(uid: "w\(number)", path: "/c/\(index)", context: "t\(number)-\(index)")
                        _ = try await store.save(subscription, allowUpdate: false)
                        if index % 4 == 0 { _ = try await store.remove(app: subscription.app, uid: subscription.uid, id: subscription.id) }
                    }
                }
            }
            try await group.waitForAll()
        }
        for store in stores { try await expectTallies(store, "side by side") }
        #expect(try await stores[0].countByKind() == [.fcm: 4 * 30])
        for store in stores.dropFirst() { store.close() }
        // Their sessions end shortly after close: their rows fold into shard 0.
        var rows = Int.max
        for _ in 0..<100 where rows > 3 {
            _ = try await stores[0].countByKind()
            for try await count in try await stores[0].client.query("SELECT count(*) FROM tally WHERE name = 'subscription:mobile'").decode(Int64.self) {
                rows = Int(count)
            }
            if rows > 3 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(rows <= 3, "\(rows) rows for one name after the other sessions ended")
        #expect(try await stores[0].countByKind() == [.fcm: 4 * 30])
        stores[0].close()
    }

    @Test("SQLite: a database from before the tallies gets them counted from its rows when it is migrated")
    func migratedFromRows() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-tally-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("store.db").path
        do {
            let store = try SQLiteStore(path: path)
            for index in 0..<5 {
                let subscription = makeSubscription(path: "/m/\(index)", context: "t\(index)")
                guard case .created(let created) = try await store.save(subscription, allowUpdate: false) else { throw StoreError.corrupt("not created") }
                var batch = CommitBatch(now: 1)
                batch.operations = [.notify(entry(subscription, created.handle!, .value))]
                _ = try await store.commit(batch)
            }
            // Back to version 4: no tally, no triggers, no history, the migrations not applied (v6 and v7 again rebuild the tables they rebuilt).
            try await store.pool.write { db in
                try db.execute(
                    sql: """
                        DROP TRIGGER subscription_tally_insert; DROP TRIGGER subscription_tally_delete;
                        DROP TRIGGER notification_tally_insert; DROP TRIGGER notification_tally_delete;
                        DROP TABLE tally;
                        DROP TRIGGER notification_coalesced_kept; DROP TRIGGER notification_coalesced_full;
                        DROP TABLE delivery_attempt; DROP TABLE record_skip; DROP TABLE discarded_notification; DROP TABLE record_coalesced;
                        DROP TRIGGER notification_head_inserted; DROP TRIGGER notification_head_deleted;
                        DROP INDEX notification_ready; DROP INDEX notification_held; ALTER TABLE notification DROP COLUMN head;
                        CREATE INDEX notification_due ON notification (next_attempt_at, id);
                        DELETE FROM grdb_migrations WHERE identifier LIKE 'v5 %' OR identifier LIKE 'v6 %' OR identifier LIKE 'v7 %'
                            OR identifier LIKE 'v8 %' OR identifier LIKE 'v9 %' OR identifier LIKE 'v10 %' OR identifier LIKE 'v11 %' OR identifier LIKE 'v12 %';
                        """)
            }
        }
        let store = try SQLiteStore(path: path)
        #expect(try await store.schemaVersion() == 12)
        #expect(try await store.countByKind() == [.fcm: 5])
        #expect(try await store.outboxDepth().count == 5)
    }
}
