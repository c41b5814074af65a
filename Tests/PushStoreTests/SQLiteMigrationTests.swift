import Foundation
import Logging
import PushCore
import PushContracts
import PushJOSE
@testable import PushStore
import PushTestSupport
import Testing

@Suite("SQLite migrations")
struct SQLiteMigrationTests {
    @Test("a version-1 database is migrated: rows kept, and no handle used before is handed out again")
    func fromVersion1() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-v1-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("store.db").path
        // A database as version 1 left it: three subscriptions, the newest then deleted.
        let setup = SQLiteMigrations.v1 + """
            CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
            INSERT INTO grdb_migrations VALUES ('v1 subscriptions, changes, outbox, service keys');
            INSERT INTO subscription VALUES (NULL,'id-1','toto','u1','mobile','','/a','t1','value','v2',NULL,1,2000000000);
            INSERT INTO subscription VALUES (NULL,'id-2','toto','u1','mobile','','/b','t2','value','v2',NULL,1,2000000000);
            INSERT INTO subscription VALUES (NULL,'id-3','toto','u1','mobile','','/c','t3','value','v2',NULL,1,2000000000);
            DELETE FROM subscription WHERE id = 'id-3';
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [path, setup]
        try TestProcesses.launch(process)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)

        // sqlite3 creates it under the umask: refused until its owner alone may read it.
        #expect(throws: StoreError.self) { try SQLiteStore(path: path) }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        let store = try SQLiteStore(path: path)
        #expect(try await store.subscription(id: "id-1")?.handle == 1)
        #expect(try await store.subscription(id: "id-2")?.handle == 2)
        guard case .created(let created) = try await store.save(makeSubscription(path: "/new"), allowUpdate: false) else {
            Issue.record("not created")
            return
        }
        #expect(created.handle == 4)  // 3 was used (and logged) before the migration
        #expect(try await store.changes(after: 0, limit: 10).map(\.handle) == [1, 2, 3, 3, 4])
    }

    @Test("a version-5 database gets the kinds apns and webpush: rows, indexes, triggers, tallies and counters kept")
    func fromVersion5() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-v5-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("store.db").path
        // A database as version 5 left it: three subscriptions (the newest deleted), two
        // notifications (the newest deleted), their tallies.
        let identifiers = SQLiteMigrations.migrator.migrations.prefix(5)
        #expect(identifiers.count == 5 && identifiers.last!.hasPrefix("v5 "))
        let setup = [SQLiteMigrations.v1, SQLiteMigrations.v2, SQLiteMigrations.v3, SQLiteMigrations.v4, SQLiteMigrations.v5].joined(separator: ";\n") + """
            ;
            CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
            \(identifiers.map { "INSERT INTO grdb_migrations VALUES ('\($0)');" }.joined(separator: "\n"))
            INSERT INTO subscription VALUES (NULL,'id-1','toto','u1','mobile','','/a','t1','value','v2',NULL,1,2000000000,NULL);
            INSERT INTO subscription VALUES (NULL,'id-2','toto','u1','webhook','orders','/b','','value','v2',NULL,1,2000000000,NULL);
            INSERT INTO subscription VALUES (NULL,'id-3','toto','u1','mobile','','/c','t3','value','v2',NULL,1,2000000000,NULL);
            DELETE FROM subscription WHERE id = 'id-3';
            INSERT INTO notification (app, subscription_handle, subscription_id, kind, target, destination, event, coalescable, payload, created_at, next_attempt_at)
            VALUES ('toto', 1, 'id-1', 'mobile', 't1', NULL, 'value', 1, X'7B7D', 5, 5), ('toto', 1, 'id-1', 'mobile', 't1', NULL, 'childEvent', 0, X'7B7D', 6, 6);
            DELETE FROM notification WHERE id = 2;
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [path, setup]
        try TestProcesses.launch(process)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)

        let store = try SQLiteStore(path: path)
        #expect(try await store.schemaVersion() == 12)
        #expect(try await store.subscription(id: "id-1")?.handle == 1)
        #expect(try await store.subscription(id: "id-2")?.tuple.destination == "orders")
        #expect(try await store.countByKind() == [.fcm: 1, .webhook: 1])
        #expect(try await store.outboxDepth().count == 1)
        // The triggers came back: a new subscription is logged and counted, its handle new.
        guard case .created(let created) = try await store.save(makeSubscription(kind: .apns, path: "/new", context: String(repeating: "0f", count: 32)), allowUpdate: false)
        else {
            Issue.record("not created")
            return
        }
        #expect(created.handle == 4)  // 3 was used before the migration
        #expect(try await store.changes(after: 0, limit: 10).map(\.handle) == [1, 2, 3, 3, 4])
        #expect(try await store.countByKind() == [.fcm: 1, .webhook: 1, .apns: 1])
        // Identity columns are still immutable; notification ids are not reused.
        await #expect(throws: (any Error).self) {
            try await store.pool.write { db in try db.execute(sql: "UPDATE subscription SET path = '/z' WHERE handle = 1") }
        }
        var batch = CommitBatch(now: 7)
        batch.operations = [.notify(entry(created, 4, .value))]
        _ = try await store.commit(batch)
        let ids = try await store.pool.read { db in try Int64.fetchAll(db, sql: "SELECT id FROM notification ORDER BY id") }
        #expect(ids == [1, 3])
        let indexes = try await store.pool.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type IN ('index', 'trigger') AND tbl_name IN ('subscription', 'notification') ORDER BY name")
        }
        #expect(indexes.contains("notification_ready") && indexes.contains("subscription_by_expiry") && indexes.contains("subscription_identity_is_immutable"))
        #expect(!indexes.contains("notification_due") && indexes.contains("notification_head_inserted") && indexes.contains("notification_head_deleted"))
        #expect(indexes.count == 19 && indexes.contains("notification_coalesced_kept") && indexes.contains("notification_coalesced_full"), "\(indexes)")
        // Version 11: the notification from before is its subscription's head (the one claimed),
        // the new one its own subscription's.
        let heads = try await store.pool.read { db in try Int64.fetchAll(db, sql: "SELECT id FROM notification WHERE head = 1 ORDER BY id") }
        #expect(heads == [1, 3])
        let integrity = try await store.pool.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
        #expect(integrity == "ok")
        // Version 7: no enumeration is checked with an IN list (a temporary B-tree per row).
        let tables = try await store.pool.read { db in
            try String.fetchAll(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name IN ('subscription', 'notification')")
        }
        #expect(tables.count == 2 && tables.allSatisfy { !$0.contains(" IN (") }, "\(tables)")
    }
}
