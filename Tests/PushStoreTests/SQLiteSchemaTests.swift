import Foundation
import GRDB
import Logging
import PushCore
import PushContracts
import PushJOSE
@testable import PushStore
import PushTestSupport
import Testing

@Suite("SQLite schema invariants")
struct SQLiteSchemaTests {
    func rawStore() throws -> (SQLiteStore, String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("store.db").path
        return (try SQLiteStore(path: path), path)
    }

    /// Runs SQL with the sqlite3 shell, as an operator might: the schema must refuse bad rows itself.
    func sqlite3(_ path: String, _ sql: String) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [path, sql]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try TestProcesses.launch(process)
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    @Test("bad rows are refused by the schema", arguments: [
        ("INSERT INTO subscription VALUES (NULL,'i1','toto','u','email','','/p','t','value','v2',NULL,1,2,NULL)", "CHECK constraint failed"),
        ("INSERT INTO subscription VALUES (NULL,'i2','toto','u','mobile','','/p','t','loud','v2',NULL,1,2,NULL)", "CHECK constraint failed"),
        ("INSERT INTO subscription VALUES (NULL,'i3','toto','u','mobile','','/p','','value','v2',NULL,1,2,NULL)", "CHECK constraint failed"),
        ("INSERT INTO subscription VALUES (NULL,'i4','toto','u','webhook','','/p','','value','v2',NULL,1,2,NULL)", "CHECK constraint failed"),
        ("INSERT INTO subscription VALUES (NULL,'i5','toto','u','mobile','orders','/p','t','value','v2',NULL,1,2,NULL)", "CHECK constraint failed"),
        ("INSERT INTO subscription VALUES (NULL,'i6','toto','u','mobile','','p','t','value','v2',NULL,1,2,NULL)", "CHECK constraint failed"),
        ("INSERT INTO subscription VALUES (NULL,'i7','toto','u','mobile','','/p','t','value','v2','{bad',1,2,NULL)", "CHECK constraint failed"),
        ("INSERT INTO subscription VALUES (NULL,'i8','toto','u','mobile','','/p','t','value','v2',NULL,'x',2,NULL)", "cannot store TEXT value in INTEGER column"),
        ("INSERT INTO subscription VALUES (NULL,'i9','toto','u','mobile','','/p','t','value','v2',NULL,1,2,'{claims')", "CHECK constraint failed"),
        ("INSERT INTO subscription VALUES (NULL,'i10','toto','u','mobile','','/p','t','value','v2',NULL,1,2,'\"' || hex(randomblob(2100)) || '\"')", "CHECK constraint failed"),
    ])
    func refusedRows(sql: String, message: String) throws {
        let (_, path) = try rawStore()
        let result = try sqlite3(path, sql)
        #expect(result.status != 0)
        #expect(result.output.contains(message), "\(result.output)")
    }

    @Test("an application's subscriptions are paged along the primary key, not sorted whole at each page (issue 35)")
    func pagesAlongHandles() async throws {
        let (store, _) = try rawStore()
        for index in 0..<5 {
            _ = try await store.save(makeSubscription(path: "/p/\(index)", context: "t\(index)"), allowUpdate: false)
        }
        #expect(try await store.subscriptions(app: "toto", after: 2, limit: 2).map(\.handle) == [3, 4])
        #expect(try await store.subscriptions(app: "other", after: 0, limit: 2).isEmpty)
        let plan = try await store.pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + SQLiteStore.applicationPage, arguments: ["toto", 0, 10])
                .map { $0["detail"] as String? ?? "" }
        }
        #expect(plan.contains { $0.contains("INTEGER PRIMARY KEY") } && !plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
    }

    @Test("a subscription's identity cannot be updated, and the tuple is unique")
    func identity() async throws {
        let (store, path) = try rawStore()
        let subscription = makeSubscription()
        _ = try await store.save(subscription, allowUpdate: false)
        let update = try sqlite3(path, "UPDATE subscription SET path = '/other'")
        #expect(update.output.contains("identity (its 6-tuple and id) never changes"))
        let duplicate = try sqlite3(
            path, "INSERT INTO subscription SELECT NULL,'other-id',app,uid,kind,destination,path,context,mode,format,encryption,created_at,expires_at,auth FROM subscription")
        #expect(duplicate.output.contains("UNIQUE constraint failed"))
    }

    /// Saves that arrive while a transaction runs are committed together, each in its own
    /// savepoint: one save's outcome never depends on another of its group.
    @Test("concurrent saves, grouped into shared transactions, each get their own outcome")
    func groupedSaves() async throws {
        let (store, _) = try rawStore()
        // 40 subscriptions, each saved three times at once (a create and two repeats), and one
        // user capped at 5 of 12.
        let distinct = (0..<40).map { makeSubscription(path: "/n\($0)") }
        let capped = (0..<12).map { makeSubscription(uid: "capped", path: "/c\($0)") }
        // Refused by the schema (claims over 4 KiB): that save fails, alone.
        var oversized = makeSubscription(uid: "big", path: "/big")
        oversized.auth = .string(String(repeating: "x", count: 5_000))
        let refused = oversized
        let outcomes = try await withThrowingTaskGroup(of: (String, SaveOutcome?).self) { group in
            group.addTask { (refused.id, try? await store.save(refused, allowUpdate: false, maxPerUser: nil)) }
            for subscription in distinct + distinct + distinct {
                group.addTask { (subscription.id, try await store.save(subscription, allowUpdate: false, maxPerUser: nil)) }
            }
            for subscription in capped {
                group.addTask { (subscription.id, try await store.save(subscription, allowUpdate: false, maxPerUser: 5)) }
            }
            var all: [(String, SaveOutcome?)] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.filter { $0.1 == nil }.map(\.0) == [refused.id])
        var created: [String: Int] = [:]
        var conflicts: [String: Int] = [:]
        var tooMany = 0
        var handles = Set<Int64>()
        for case (let id, let outcome?) in outcomes {
            switch outcome {
            case .created(let subscription):
                created[id, default: 0] += 1
                handles.insert(subscription.handle!)
            case .conflict: conflicts[id, default: 0] += 1
            case .tooMany: tooMany += 1
            default: Issue.record("unexpected \(outcome)")
            }
        }
        #expect(distinct.allSatisfy { created[$0.id] == 1 && conflicts[$0.id] == 2 })
        #expect(capped.filter { created[$0.id] == 1 }.count == 5 && tooMany == 7)
        #expect(handles.count == 45)
        #expect(try await store.countByKind() == [.fcm: 45])
        #expect(try await store.changes(after: 0, limit: 1000).count == 45)
    }

    /// GRDB turns WAL mode on with `synchronous = NORMAL` after the connection's own set-up:
    /// commits (ingestion batches, whose records are then acknowledged) would reach the disk
    /// only at a checkpoint.
    @Test("the writer commits with synchronous = FULL, before and after a transaction, and on a reopened database")
    func durableCommits() async throws {
        let (store, path) = try rawStore()
        func level(_ store: SQLiteStore) async throws -> Int? {
            try await store.pool.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
        }
        #expect(try await level(store) == 2)
        _ = try await store.save(makeSubscription(), allowUpdate: false)
        #expect(try await level(store) == 2)
        let reopened = try SQLiteStore(path: path)
        #expect(try await level(reopened) == 2)
        #expect(try await reopened.pool.write { try String.fetchOne($0, sql: "PRAGMA journal_mode") } == "wal")
    }

    /// The dispatcher's claims and settlements are the only writes that do not wait for the
    /// disk; the writer is back at FULL after each, even one that failed, and a durable write
    /// that finds it left at NORMAL sets FULL before it commits.
    @Test("claims and settlements commit with synchronous = NORMAL, and every other write still with FULL")
    func relaxedCommits() async throws {
        let (store, _) = try rawStore()
        func level() async throws -> Int? {
            try await store.pool.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
        }
        #expect(try await store.writeRelaxed { try Int.fetchOne($0, sql: "PRAGMA synchronous") } == 1)
        #expect(try await level() == 2)
        _ = try await store.claimDue(now: 0, limit: 10, claimant: "test", leaseUntil: 1_000, excluding: [], capped: [:])
        #expect(try await level() == 2)
        _ = try await store.settleAndClaimDue(
            [], attempts: [], settledAt: 0, claimant: "test", now: 0, limit: 10, leaseUntil: 1_000, excluding: [], capped: [:])
        #expect(try await level() == 2)
        struct Refused: Error {}
        await #expect(throws: (any Error).self) { try await store.writeRelaxed { _ in throw Refused() } }
        #expect(try await level() == 2)
        // A relaxed write that could not set FULL back leaves the flag: the next durable write
        // commits with FULL all the same.
        try await store.pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = NORMAL") }
        store.relaxed.withLock { $0 = true }
        #expect(try await store.write { try Int.fetchOne($0, sql: "PRAGMA synchronous") } == 2)
        #expect(!store.relaxed.withLock { $0 })
        _ = try await store.save(makeSubscription(), allowUpdate: false)
        #expect(try await level() == 2)
    }

    /// Debian's SQLite zeroes every freed page (SECURE_DELETE), which wrote each snapshot's
    /// freed journal pages through the WAL and the checkpoint a second time. FAST keeps wiping
    /// deleted rows inside the pages a transaction writes anyway.
    @Test("deleted rows are wiped from the pages written (secure_delete = FAST), freed pages are not rewritten")
    func deletedContentWiped() async throws {
        let (store, path) = try rawStore()
        let marker = "secret-value-\(UUID().uuidString)"
        let mode = try await store.pool.write { db -> Int? in
            try db.execute(sql: "INSERT INTO tree_journal (app, records) VALUES ('keep', x'00')")
            try db.execute(sql: "INSERT INTO tree_journal (app, records) VALUES ('gone', ?)", arguments: [Data(marker.utf8)])
            return try Int.fetchOne(db, sql: "PRAGMA secure_delete")
        }
        #expect(mode == 2)
        try await store.pool.write { try $0.execute(sql: "DELETE FROM tree_journal WHERE app = 'gone'") }
        try await store.pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let found = bytes.withUnsafeBufferPointer { haystack in
            Array(marker.utf8).withUnsafeBufferPointer { needle in
                (0...(haystack.count - needle.count)).contains { start in
                    (0..<needle.count).allSatisfy { haystack[start + $0] == needle[$0] }
                }
            }
        }
        #expect(!found, "the deleted row's bytes are still in the database file")
        #expect(bytes.count > 0)
    }
}
