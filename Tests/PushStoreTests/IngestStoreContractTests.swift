import Foundation
import PostgresNIO
import PushCore
import PushContracts
@testable import PushStore
import Testing

/// The contract of the ingestion side of a store: one atomic commit of notifications,
/// revocations, journal and checkpoints; coalescing; snapshots.
@Suite("Ingest store contract")
struct IngestStoreContractTests {
    func stored(_ store: any SubscriptionStore, _ subscription: Subscription) async throws -> Int64 {
        guard case .created(let created) = try await store.save(subscription, allowUpdate: false), let handle = created.handle else {
            throw StoreError.corrupt("not created")
        }
        return handle
    }

    @Test("a value or noData notification replaces the waiting ones of its subscription; childEvent ones queue", arguments: StoreKind.all)
    func coalescing(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let value = makeSubscription(path: "/v", mode: .value)
        let child = makeSubscription(path: "/c", mode: .childEvent)
        let v = try await stored(store, value)
        let c = try await stored(store, child)
        var first = CommitBatch(now: 1)
        first.operations = [.notify(entry(value, v, .value, payload: "1")), .notify(entry(child, c, .childEvent, payload: "a"))]
        _ = try await store.commit(first)
        var second = CommitBatch(now: 2)
        var newer = entry(value, v, .value, payload: "2")
        newer.recordSeq = 2
        second.operations = [.notify(newer), .notify(entry(child, c, .childEvent, payload: "b"))]
        let result = try await store.commit(second)
        #expect(result.coalesced == 1 && result.queued == 1)
        // The waiting value notification took the newer content in place: it keeps its place
        // and the time since which its subscription waits.
        let queued = try await store.notifications(limit: 10)
        #expect(queued.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["2", "a", "b"])
        #expect(queued.map(\.createdAt) == [1, 1, 2])
        #expect(queued.map(\.entry.recordSeq) == [2, 1, 1])
        let depth = try await store.outboxDepth()
        #expect(depth.count == 3 && depth.oldest == 1)
    }

    /// Runs SQL on the store's own database (to put rows in states only a delivery makes).
    func execute(_ sql: String, on store: any FullStore) async throws {
        if let sqlite = store as? SQLiteStore {
            try await sqlite.pool.write { db in try db.execute(sql: sql) }
        } else if let postgres = store as? PostgresStore {
            try await postgres.client.query(PostgresQuery(unsafeSQL: sql))
        } else {
            throw StoreError.corrupt("unknown store")
        }
    }

    @Test("a waiting notification that is backing off keeps its schedule when replaced; one in flight is not replaced", arguments: StoreKind.all)
    func coalescingKeepsScheduleSparesInFlight(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let value = makeSubscription(path: "/v", mode: .value)
        let v = try await stored(store, value)
        var first = CommitBatch(now: 1)
        first.operations = [.notify(entry(value, v, .value, payload: "1"))]
        _ = try await store.commit(first)
        try await execute("UPDATE notification SET attempts = 3, first_attempt_at = 5, next_attempt_at = 9000", on: store)
        var second = CommitBatch(now: 2)
        // No record number and no target: absent stays absent through a replacement.
        var newer = entry(value, v, .value, payload: "2")
        newer.recordSeq = nil
        second.operations = [.notify(newer)]
        _ = try await store.commit(second)
        var rows = try await store.notifications(limit: 10)
        #expect(rows.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["2"])
        #expect(rows.map(\.attempts) == [3] && rows.map(\.nextAttemptAt) == [9000])
        #expect(rows.map(\.entry.recordSeq) == [nil])
        // In flight: a newer notification queues behind it.
        try await execute("UPDATE notification SET claimed_until = 99999, claimed_by = 'x'", on: store)
        var third = CommitBatch(now: 3)
        var inserted = entry(value, v, .value, payload: "3")
        inserted.recordSeq = nil
        // A webhook's notification has a destination and no target.
        let webhook = makeSubscription(kind: .webhook, context: nil, destination: "orders", mode: .value)
        let w = try await stored(store, webhook)
        third.operations = [.notify(inserted), .notify(entry(webhook, w, .value, payload: "w"))]
        let result = try await store.commit(third)
        #expect(result.queued == 2 && result.coalesced == 0)
        rows = try await store.notifications(limit: 10)
        #expect(rows.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["2", "3", "w"])
        #expect(rows.map(\.entry.recordSeq) == [nil, nil, 1])
        #expect(rows.map(\.entry.target) == ["token-1", "token-1", nil] && rows.map(\.entry.destination) == [nil, nil, "orders"])
    }

    @Test("in one batch, a subscription's value/noData notifications make one, in the place of the first, as across batches", arguments: StoreKind.all)
    func coalescingInBatch(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let value = makeSubscription(path: "/v", mode: .value)
        let child = makeSubscription(path: "/c", mode: .childEvent)
        let v = try await stored(store, value)
        let c = try await stored(store, child)
        var batch = CommitBatch(now: 1)
        batch.operations = [
            .notify(entry(value, v, .value, payload: "1")), .notify(entry(child, c, .childEvent, payload: "a")),
            .notify(entry(value, v, .value, payload: "2")), .notify(entry(child, c, .childEvent, payload: "b")),
            .notify(entry(value, v, .value, payload: "3")),
        ]
        let result = try await store.commit(batch)
        #expect(result.coalesced == 2 && result.queued == 3)
        #expect(try await store.notifications(limit: 10).map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["3", "a", "b"])
    }

    @Test("a notification for a subscription that is gone is not queued", arguments: StoreKind.all)
    func goneSubscription(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let subscription = makeSubscription()
        let handle = try await stored(store, subscription)
        _ = try await store.remove(app: "toto", uid: "u1", id: subscription.id)
        var batch = CommitBatch(now: 1)
        batch.operations = [.notify(entry(subscription, handle, .value))]
        #expect(try await store.commit(batch).queued == 0)
        #expect(try await store.notifications(limit: 10).isEmpty)
    }

    @Test("a revocation deletes the subscription, drops its waiting values, keeps its childEvents ahead, queues its revoke", arguments: StoreKind.all)
    func revocation(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let subscription = makeSubscription(mode: .value)
        let handle = try await stored(store, subscription)
        var batch = CommitBatch(now: 1)
        batch.operations = [
            .notify(entry(subscription, handle, .childEvent, payload: "c")), .notify(entry(subscription, handle, .value, payload: "v")),
            .revoke(handle: handle, notification: entry(subscription, handle, .revoke, payload: "r"), condition: .exists),
            // A second revocation of the same subscription does nothing: it is gone.
            .revoke(handle: handle, notification: entry(subscription, handle, .revoke, payload: "again"), condition: .exists),
        ]
        let result = try await store.commit(batch)
        #expect(result.revoked == [handle])
        #expect(try await store.notifications(limit: 10).map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["c", "r"])
        #expect(try await store.subscription(id: subscription.id) == nil)
        // A revocation of something already removed queues its notification regardless.
        var legacy = CommitBatch(now: 2)
        legacy.operations = [.revoke(handle: handle, notification: entry(subscription, handle, .revoke, payload: "late"), condition: .alreadyRemoved)]
        #expect(try await store.commit(legacy).queued == 1)
    }

    @Test("journal rows and checkpoints commit with the batch; a checkpoint is replaced", arguments: StoreKind.all)
    func journalAndCheckpoints(kind: StoreKind) async throws {
        let (store, reopen) = try await kind.make()
        var batch = CommitBatch(now: 1)
        batch.journal = ["toto": Array("a\nb\n".utf8), "other": Array("c\n".utf8)]
        batch.checkpoints = [SourceCheckpoint(source: "queue-file", lastSeq: 7, position: 100, fileIdentity: "1:2"), SourceCheckpoint(source: "socket", lastSeq: 3)]
        let result = try await store.commit(batch)
        #expect(Set(result.journalIDs.keys) == ["toto", "other"])
        var next = CommitBatch(now: 2)
        next.journal = ["toto": Array("d\n".utf8)]
        next.checkpoints = [SourceCheckpoint(source: "queue-file", lastSeq: 9, position: 150, fileIdentity: "1:3")]
        _ = try await store.commit(next)
        let again = try await reopen()
        #expect(try await again.checkpoints() == [
            SourceCheckpoint(source: "queue-file", lastSeq: 9, position: 150, fileIdentity: "1:3"), SourceCheckpoint(source: "socket", lastSeq: 3),
        ])
        #expect(try await again.treeApplications() == ["other", "toto"])
        let toto = try await again.tree(app: "toto")
        #expect(toto.snapshot == nil && toto.journal.map { String(decoding: $0.lines, as: UTF8.self) } == ["a\nb\n", "d\n"])
    }

    @Test("a failing batch commits nothing of itself", arguments: StoreKind.all)
    func atomicity(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let subscription = makeSubscription()
        let handle = try await stored(store, subscription)
        var bad = entry(subscription, handle, .value)
        bad.kind = .webhook  // a webhook notification without a destination breaks a rule of the schema
        var batch = CommitBatch(now: 1)
        batch.journal = ["toto": Array("x\n".utf8)]
        batch.checkpoints = [SourceCheckpoint(source: "socket", lastSeq: 5)]
        batch.operations = [
            .notify(entry(subscription, handle, .childEvent)), .revoke(handle: handle, notification: nil, condition: .exists),
            .revoke(handle: handle, notification: bad, condition: .alreadyRemoved),  // fails last
        ]
        await #expect(throws: StoreError.self) { _ = try await store.commit(batch) }
        #expect(try await store.notifications(limit: 10).isEmpty)
        #expect(try await store.checkpoints().isEmpty)
        #expect(try await store.treeApplications().isEmpty)
        #expect(try await store.subscription(id: subscription.id) != nil)
    }

    @Test("a snapshot covers the journal up to its row, survives reopening, and replaces the previous one", arguments: StoreKind.all)
    func snapshots(kind: StoreKind) async throws {
        let (store, reopen) = try await kind.make()
        var ids: [Int64] = []
        for line in ["1", "2", "3"] {
            var batch = CommitBatch(now: 1)
            batch.journal = ["toto": Array("\(line)\n".utf8)]
            ids.append(try await store.commit(batch).journalIDs["toto"]!)
        }
        // Larger than one chunk, so that it is written in several.
        let big = Array(repeating: UInt8(ascii: "x"), count: SQLiteStore.snapshotChunkBytes * 2 + 17)
        try await store.saveSnapshot(app: "toto", tree: big, through: ids[1])
        var tree = try await reopen().tree(app: "toto")
        #expect(tree.snapshot == big && tree.snapshotThrough == ids[1])
        #expect(tree.journal.map { String(decoding: $0.lines, as: UTF8.self) } == ["3\n"])
        try await store.saveSnapshot(app: "toto", tree: Array("{}".utf8), through: ids[2])
        tree = try await store.tree(app: "toto")
        #expect(tree.snapshot == Array("{}".utf8) && tree.journal.isEmpty)
    }
}
