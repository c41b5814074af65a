import Foundation
import GRDB
import PushContracts
import PushCore
@testable import PushStore
import PushTestSupport
import Testing

/// SQLite schema v12: the history's index by subscription is ordered by era (`id >> 11`) first;
/// the reads by subscription seek each era, newest first, and must give what one ordered read
/// of a subscription's attempts gave.
@Suite("SQLite: the history's attempts indexed by subscription within eras")
struct AttemptEraTests {
    static let era: Int64 = 1 << SQLiteStore.attemptEraShift

    static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-attempt-era-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// An attempt written with its id, so that a test spans eras without writing thousands.
    struct Written: Equatable {
        var id: Int64
        var subscription: String
        var app: String
    }

    static func insert(_ db: Database, _ written: Written) throws {
        try db.execute(
            sql: """
                INSERT INTO delivery_attempt (id, notification, subscription, app, seq, provider, attempt, at, status, latency_ms, outcome)
                VALUES (?, ?, ?, ?, ?, 'fcm', 1, ?, 200, 3, 'delivered')
                """, arguments: [written.id, written.id, written.subscription, written.app, written.id, written.id])
    }

    /// Every page of a subscription's attempts, newest first, `limit` at a time: their ids.
    static func pages(_ store: SQLiteStore, app: String, subscription: String, limit: Int) async throws -> [Int64] {
        var all: [Int64] = []
        var cursor: Int64?
        var pages = 0
        repeat {
            let page = try await store.attempts(app: app, subscription: subscription, cursor: cursor, limit: limit)
            #expect(page.items.count <= limit)
            #expect(page.nextCursor == nil || page.items.count == limit)
            all += page.items.map(\.notification)
            cursor = page.nextCursor
            pages += 1
        } while cursor != nil && pages < 10_000
        return all
    }

    @Test("attempts spread over eras, some empty, two applications under one id: each subscription's read back whole, newest first, at every page size")
    func readsAcrossEras() async throws {
        let store = try SQLiteStore(path: try Self.folder().appendingPathComponent("store.db").path)
        let tokens = ["token-a", "token-b", "token-c", "token-d"]
        var subscriptions: [String] = []
        for token in tokens {
            let subscription = makeSubscription(path: "/\(token)", context: token)
            guard case .created = try await store.save(subscription, allowUpdate: false) else { throw StoreError.corrupt("not created") }
            subscriptions.append(subscription.id)
        }
        var random = SeededRandom(seed: 12)
        var written: [Written] = []
        var id: Int64 = 1
        for round in 0..<30 {
            // Ids jump: within an era, to its last id, to the next era, or over several.
            let step: Int64 = [1, 7, Self.era - 1, Self.era, 3 * Self.era + 5][Int.random(in: 0..<5, using: &random)]
            id += step
            // The fourth subscription never gets one; the first now and then from another app.
            let subscription = subscriptions[Int.random(in: 0..<3, using: &random)]
            let app = subscription == subscriptions[0] && round % 4 == 0 ? "other" : "toto"
            let new = Written(id: id, subscription: subscription, app: app)
            try await store.write { db in try Self.insert(db, new) }
            written.append(new)
        }
        // Then a settlement's way, ids given by SQLite after the largest: the first two
        // subscriptions only, the newest of all from another application under the first's id.
        // The third's newest attempt stays in an older era, the fourth has none: the search for
        // last attempts goes past the newest era, and to the oldest.
        id += 2 * Self.era
        let jump = Written(id: id, subscription: subscriptions[1], app: "toto")
        try await store.write { db in try Self.insert(db, jump) }
        written.append(jump)
        let tail = (0..<5).map { offset in
            DeliveryAttempt(
                notification: id + 1 + Int64(offset), subscription: subscriptions[offset % 2], app: offset == 4 ? "other" : "toto", seq: 1,
                provider: "fcm", destination: nil, attempt: 1, at: 1, status: 200, reason: nil, latencyMs: 3, outcome: .delivered, nextAt: nil)
        }
        try await store.write { db in try SQLiteStore.insertAttempts(db, tail) }
        written += tail.map { Written(id: $0.notification, subscription: $0.subscription, app: $0.app) }
        let eras = Set(written.map { $0.id >> SQLiteStore.attemptEraShift })
        #expect(eras.count >= 8, "the attempts span several eras: \(eras.count)")
        let third = try #require(written.last { $0.subscription == subscriptions[2] })
        #expect(third.id >> SQLiteStore.attemptEraShift < written.last!.id >> SQLiteStore.attemptEraShift - 1)
        #expect(written.last { $0.subscription == subscriptions[0] }?.app == "other")

        func check(_ stage: String) async throws {
            for (subscription, token) in zip(subscriptions, tokens) {
                for app in ["toto", "other"] {
                    let expected = written.filter { $0.subscription == subscription && $0.app == app }.map(\.id).reversed()
                    for limit in [1, 2, 3, 500] {
                        #expect(try await Self.pages(store, app: app, subscription: subscription, limit: limit) == Array(expected), "\(stage), \(app), limit \(limit)")
                    }
                }
                // The newest attempt under the subscription's id, whichever application wrote it.
                let found = try await store.subscriptions(matching: SubscriptionQuery(app: "toto", token: token), cursor: nil, limit: 10)
                #expect(found.items.map(\.lastAttempt?.notification) == [written.last { $0.subscription == subscription }?.id], "\(stage)")
            }
            let all = try await store.subscriptions(matching: SubscriptionQuery(app: "toto"), cursor: nil, limit: 500)
            #expect(all.items.map(\.lastAttempt?.notification) == subscriptions.map { id in written.last { $0.subscription == id }?.id }, "\(stage)")
        }
        // The reads' statements use the index by era, with no sort, with statistics or without.
        func plans() async throws -> [String] {
            try await store.read { db in
                try [
                    (SQLiteStore.attemptsInEraSQL, [1, "x", "toto", Int64.max, 10] as [any DatabaseValueConvertible]),
                    (SQLiteStore.lastAttemptsInEraSQL(count: 2), [1, "x", "y"]),
                ].map { sql, arguments in
                    try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: StatementArguments(arguments)).map { $0["detail"] as String }
                        .joined(separator: "; ")
                }
            }
        }
        try await check("as written")
        for plan in try await plans() {
            #expect(plan.contains("INDEX delivery_attempt_by_era (<expr>=? AND subscription=?") && !plan.contains("TEMP B-TREE"), "\(plan)")
        }
        // Statistics change neither the answers nor the plans.
        try await store.write { db in try db.execute(sql: "ANALYZE") }
        try await check("after ANALYZE")
        for plan in try await plans() {
            #expect(plan.contains("INDEX delivery_attempt_by_era (<expr>=? AND subscription=?") && !plan.contains("TEMP B-TREE"), "\(plan)")
        }
        // Pruned from the oldest: what is left still reads back whole.
        let keep = written.count / 2
        let pruned = try await store.pruneHistory(now: 1_000, limits: HistoryLimits(maxAge: 1_000_000, maxRows: Int(written.last!.id - written[written.count - keep - 1].id)))
        written.removeFirst(written.count - keep)
        #expect(pruned > 0)
        try await check("after pruning")
    }

    @Test("cursors from outside, whatever their value: no crash, no attempt at or above the cursor")
    func hostileCursors() async throws {
        let store = try SQLiteStore(path: try Self.folder().appendingPathComponent("store.db").path)
        try await store.write { db in
            for id: Int64 in [1, 2, 5_000, 9_000_000] { try Self.insert(db, Written(id: id, subscription: "s", app: "toto")) }
        }
        for cursor: Int64 in [Int64.min, -1, 0, 1, 2, 3, 5_000, 5_001, 9_000_000, 9_000_001, Int64.max] {
            let page = try await store.attempts(app: "toto", subscription: "s", cursor: cursor, limit: 10)
            #expect(page.items.map(\.notification) == [9_000_000, 5_000, 2, 1].filter { $0 < cursor }, "cursor \(cursor)")
            #expect(page.nextCursor == nil)
        }
        #expect(try await store.attempts(app: "toto", subscription: "nobody", cursor: nil, limit: 10).items.isEmpty)
        let empty = try SQLiteStore(path: try Self.folder().appendingPathComponent("store.db").path)
        #expect(try await empty.attempts(app: "toto", subscription: "s", cursor: nil, limit: 10).items.isEmpty)
    }

    @Test("a version-11 database: the migration builds the index by era, and old and new attempts read back together")
    func fromVersion11() async throws {
        let path = try Self.folder().appendingPathComponent("store.db").path
        do {
            SQLiteProcessSettings.apply()
            let queue = try DatabaseQueue(path: path)
            try SQLiteMigrations.migrator.migrate(queue, upTo: "v11 each subscription's oldest notification marked: claims read those alone")
            try await queue.write { db in
                for id: Int64 in [1, 2, 3, 2_048, 2_049, 10_000] {
                    try Self.insert(db, Written(id: id, subscription: id % 2 == 0 ? "even" : "odd", app: "toto"))
                }
            }
            try queue.close()
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        let store = try SQLiteStore(path: path)
        #expect(try await store.schemaVersion() == 12)
        let indexes = try await store.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'delivery_attempt' ORDER BY name")
        }
        #expect(indexes == ["delivery_attempt_by_era", "delivery_attempt_by_record"])
        try await store.write { db in
            try SQLiteStore.insertAttempts(
                db,
                [
                    DeliveryAttempt(
                        notification: 10_001, subscription: "odd", app: "toto", seq: 1, provider: "fcm", destination: nil, attempt: 1, at: 1, status: 200,
                        reason: nil, latencyMs: 3, outcome: .delivered, nextAt: nil)
                ])
        }
        #expect(try await Self.pages(store, app: "toto", subscription: "odd", limit: 2) == [10_001, 2_049, 3, 1])
        #expect(try await Self.pages(store, app: "toto", subscription: "even", limit: 2) == [10_000, 2_048, 2])
    }
}
