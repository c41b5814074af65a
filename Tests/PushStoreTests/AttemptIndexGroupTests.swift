import Foundation
import GRDB
import PushContracts
import PushCore
@testable import PushStore
import PushTestSupport
import Testing

/// SQLite schema v12: delivery attempts are written unindexed by subscription and indexed in
/// groups; the reads by subscription see both parts, whatever the split.
@Suite("SQLite: attempts indexed by subscription in groups")
struct AttemptIndexGroupTests {
    static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-attempt-index-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    static func attempt(_ subscription: String, app: String = "toto", number: Int) -> DeliveryAttempt {
        DeliveryAttempt(
            notification: Int64(number), subscription: subscription, app: app, seq: Int64(number), provider: "fcm", destination: nil, attempt: 1,
            at: Int64(number), status: 200, reason: nil, latencyMs: 3, outcome: .delivered, nextAt: nil)
    }

    /// Every page of a subscription's attempts, newest first, `limit` at a time.
    static func pages(_ store: SQLiteStore, app: String, subscription: String, limit: Int) async throws -> [DeliveryAttempt] {
        var all: [DeliveryAttempt] = []
        var cursor: Int64?
        repeat {
            let page = try await store.attempts(app: app, subscription: subscription, cursor: cursor, limit: limit)
            #expect(page.items.count <= limit)
            all += page.items
            cursor = page.nextCursor
        } while cursor != nil
        return all
    }

    static func unindexed(_ store: SQLiteStore) async throws -> Int {
        try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM delivery_attempt WHERE indexed = 0") ?? 0 }
    }

    @Test("settlements of random sizes: each subscription's attempts read back whole and in order, paged across the indexed and unindexed parts")
    func readsAcrossTheSplit() async throws {
        let path = try Self.folder().appendingPathComponent("store.db").path
        let store = try SQLiteStore(path: path, attemptIndexGroup: 5)
        var subscriptions: [String] = []
        let tokens = ["token-a", "token-b", "token-c"]
        for token in tokens {
            let subscription = makeSubscription(path: "/\(token)", context: token)
            guard case .created = try await store.save(subscription, allowUpdate: false) else { throw StoreError.corrupt("not created") }
            subscriptions.append(subscription.id)
        }
        var random = SeededRandom(seed: 35)
        var written: [DeliveryAttempt] = []
        var mostUnindexed = 0
        for round in 0..<40 {
            let count = Int.random(in: 1...7, using: &random)
            let batch = (0..<count).map { offset -> DeliveryAttempt in
                let number = written.count + offset + 1
                // Now and then another application's attempt under the same id: never shown.
                return number % 11 == 0
                    ? Self.attempt(subscriptions[0], app: "other", number: number)
                    : Self.attempt(subscriptions[Int.random(in: 0..<3, using: &random)], number: number)
            }
            try await store.write { db in try SQLiteStore.insertAttempts(db, batch, indexGroup: store.attemptIndexGroup) }
            written += batch
            // Never a whole group waits unindexed.
            let unindexed = try await Self.unindexed(store)
            #expect(unindexed < 5, "round \(round)")
            mostUnindexed = max(mostUnindexed, unindexed)
            for (subscription, token) in zip(subscriptions, tokens) {
                let expected = written.filter { $0.subscription == subscription && $0.app == "toto" }.reversed()
                for limit in [1, 2, 3, 100] {
                    let read = try await Self.pages(store, app: "toto", subscription: subscription, limit: limit)
                    #expect(read == Array(expected), "round \(round), limit \(limit)")
                }
                // The newest attempt under the subscription's id, whichever application wrote it
                // (as before v12).
                let found = try await store.subscriptions(matching: SubscriptionQuery(app: "toto", token: token), cursor: nil, limit: 10)
                let newest = written.last { $0.subscription == subscription }
                #expect(found.items.map(\.lastAttempt) == [newest], "round \(round)")
            }
        }
        // Most were indexed and some waited each time: both parts were read.
        let indexed = try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM delivery_attempt WHERE indexed = 1") ?? 0 }
        #expect(indexed >= 100 && mostUnindexed >= 2)
        #expect(try await store.attempts(app: "nobody", subscription: subscriptions[0], cursor: nil, limit: 10).items.isEmpty)

        // With statistics the planner would take the unindexed part from the primary key down
        // the whole table: the reads name their indexes, and give the same answers.
        try await store.write { db in try db.execute(sql: "ANALYZE") }
        for subscription in subscriptions {
            let expected = written.filter { $0.subscription == subscription && $0.app == "toto" }.reversed()
            #expect(try await Self.pages(store, app: "toto", subscription: subscription, limit: 4) == Array(expected))
        }
        // The service's statements, as they are planned with statistics.
        let first = subscriptions[0]
        let plans = try await store.read { db in
            try [(false, true), (true, true), (false, false), (true, false)].map { indexed, app in
                try Row.fetchAll(
                    db, sql: "EXPLAIN QUERY PLAN " + SQLiteStore.attemptRowsSQL(indexed: indexed, app: app),
                    arguments: StatementArguments([first] + (app ? ["toto"] : []) + [Int64.max, 10] as [any DatabaseValueConvertible])
                ).map { $0["detail"] as String }.joined()
            }
        }
        for (number, plan) in plans.enumerated() {
            #expect(plan.contains(number % 2 == 0 ? "USING INDEX delivery_attempt_unindexed" : "USING INDEX delivery_attempt_by_subscription"), "\(plans)")
        }
    }

    @Test("through settlements and pruning: attempts indexed in groups of two, read back whole, and what pruning left still indexed in its turn")
    func throughSettlements() async throws {
        let path = try Self.folder().appendingPathComponent("store.db").path
        let store = try SQLiteStore(path: path, attemptIndexGroup: 2)
        let history = HistoryStoreContractTests()
        let a = makeSubscription(path: "/a", context: "token-a")
        let handle = try await history.stored(store, a)
        var ids: [Int64] = []
        for round in 1...5 {
            let now = Int64(round * 10)
            try await history.commit(store, now: now, [.notify(history.entry(a, handle, .childEvent, seq: Int64(round)))])
            let claimed = try #require(try await store.claim(now: now, limit: 10, claimant: "me", leaseUntil: now + 60_000, excluding: []).first)
            _ = try await store.settle(
                [.delivered(id: claimed.id)], attempts: [history.attempt(claimed, at: now + 1, outcome: .delivered)], claimant: "me", now: now + 1)
            ids.insert(claimed.id, at: 0)
            #expect(try await Self.unindexed(store) == round % 2, "round \(round)")
            #expect(try await Self.pages(store, app: "toto", subscription: a.id, limit: 2).map(\.notification) == ids, "round \(round)")
        }
        // Pruned to the newest two rows: one indexed, one waiting. The next settlement indexes both.
        #expect(try await store.pruneHistory(now: 100, limits: HistoryLimits(maxAge: 1_000_000, maxRows: 2)) == 3)
        #expect(try await Self.pages(store, app: "toto", subscription: a.id, limit: 1).map(\.notification) == Array(ids.prefix(2)))
        try await history.commit(store, now: 200, [.notify(history.entry(a, handle, .childEvent, seq: 6))])
        let claimed = try #require(try await store.claim(now: 200, limit: 10, claimant: "me", leaseUntil: 60_000, excluding: []).first)
        _ = try await store.settle([.delivered(id: claimed.id)], attempts: [history.attempt(claimed, at: 201, outcome: .delivered)], claimant: "me", now: 201)
        #expect(try await Self.unindexed(store) == 0)
        #expect(try await Self.pages(store, app: "toto", subscription: a.id, limit: 2).map(\.notification) == [claimed.id] + ids.prefix(2))
        let found = try await store.subscriptions(matching: SubscriptionQuery(app: "toto", token: "token-a"), cursor: nil, limit: 10)
        #expect(found.items.first?.lastAttempt?.notification == claimed.id)
    }

    @Test("a version-11 database's attempts are indexed by the migration and read back with the new ones")
    func fromVersion11() async throws {
        let path = try Self.folder().appendingPathComponent("store.db").path
        do {
            let queue = try DatabaseQueue(path: path)
            try SQLiteMigrations.migrator.migrate(queue, upTo: "v11 each subscription's oldest notification marked: claims read those alone")
            try await queue.write { db in
                for number in 1...6 {
                    try db.execute(
                        sql: """
                            INSERT INTO delivery_attempt (notification, subscription, app, seq, provider, attempt, at, status, latency_ms, outcome)
                            VALUES (?, ?, 'toto', ?, 'fcm', 1, ?, 200, 3, 'delivered')
                            """, arguments: [number, number % 2 == 0 ? "even" : "odd", number, number])
                }
            }
            try queue.close()
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        let store = try SQLiteStore(path: path, attemptIndexGroup: 4)
        #expect(try await Self.unindexed(store) == 0)
        let new = (7...9).map { Self.attempt($0 % 2 == 0 ? "even" : "odd", number: $0) }
        try await store.write { db in try SQLiteStore.insertAttempts(db, new, indexGroup: store.attemptIndexGroup) }
        #expect(try await Self.unindexed(store) == 3)
        #expect(try await Self.pages(store, app: "toto", subscription: "odd", limit: 2).map(\.notification) == [9, 7, 5, 3, 1])
        #expect(try await Self.pages(store, app: "toto", subscription: "even", limit: 2).map(\.notification) == [8, 6, 4, 2])
    }
}
