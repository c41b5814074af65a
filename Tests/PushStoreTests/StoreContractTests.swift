import Foundation
import Logging
import PushCore
import PushContracts
import PushJOSE
@testable import PushStore
import PushTestSupport
import Testing

/// The contract every store meets. Each test runs against every store kind it applies to:
/// SQLite in a temporary folder, and PostgreSQL (a database of its own on the test cluster of
/// ``PostgresTestServer``) for what the PostgreSQL store implements so far: subscriptions, the
/// change log and service keys.
typealias FullStore = SubscriptionStore & ServiceKeyStore & IngestStore & DeliveryStore & HistoryStore

enum StoreKind: String, CaseIterable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// Every store: SQLite, and PostgreSQL when a server runs (see ``subscriptionStores``).
    static var all: [StoreKind] { subscriptionStores }

    /// Kinds that implement `SubscriptionStore` and `ServiceKeyStore`.
    static let subscriptionStores: [StoreKind] = {
        switch PostgresTestServer.shared {
        case .success: return [.sqlite, .postgres]
        case .failure where ProcessInfo.processInfo.environment["TEST_PUSHDISPATCH_REQUIRE_POSTGRES"] == "1":
            return [.sqlite, .postgres]  // CI: the PostgreSQL cases run and fail with the reason
        case .failure(let error):
            print("PostgreSQL store tests skipped: \(error)")
            return [.sqlite]
        }
    }()

    /// A fresh, empty store; `reopen` gives another handle on the same data.
    func make() async throws -> (store: any FullStore, reopen: @Sendable () async throws -> any FullStore) {
        switch self {
        case .sqlite:
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let path = folder.appendingPathComponent("store.db").path
            return (try SQLiteStore(path: path), { try SQLiteStore(path: path) })
        case .postgres:
            let url = try PostgresTestServer.shared.get().createDatabase()
            let logger = Logger(label: "postgres-test", factory: { _ in SwiftLogNoOpLogHandler() })
            let store = try await PostgresStore.open(url: url, logger: logger)
            return (store, { try await PostgresStore.open(url: url, logger: logger) })
        }
    }

    /// A fresh, empty subscription store; `reopen` gives another handle on the same data.
    func makeSubscriptionStore() async throws -> (
        store: any SubscriptionStore & ServiceKeyStore, reopen: @Sendable () async throws -> any SubscriptionStore & ServiceKeyStore
    ) {
        let (store, reopen) = try await make()
        return (store, { try await reopen() })
    }
}

/// A notification entry for a stored subscription.
func entry(_ subscription: Subscription, _ handle: Int64, _ kind: NotificationKind, payload: String = "{}") -> OutboxEntry {
    OutboxEntry(
        app: subscription.app, subscriptionHandle: handle, subscriptionID: subscription.id, kind: subscription.kind,
        target: subscription.tuple.context, destination: subscription.tuple.destination, notification: kind, payload: Array(payload.utf8),
        recordSeq: 1)
}

func makeSubscription(
    app: String = "toto", uid: String = "u1", kind: SubscriptionKind = .fcm, path: String = "/a/b", context: String? = "token-1",
    destination: String? = nil, mode: Mode = .value, expiresAt: Int64 = 2_000_000_000
) -> Subscription {
    let tuple = SubscriptionTuple(app: app, uid: uid, kind: kind, destination: destination, path: try! Path(path), context: context)
    return Subscription(
        id: SubscriptionID.derive(tuple), tuple: tuple, mode: mode, format: .v2, encryption: nil, createdAt: 1_700_000_000,
        expiresAt: expiresAt)
}

@Suite("Subscription store contract", .processLevel)
struct StoreContractTests {
    @Test("save creates, then refreshes only when allowed, keeping createdAt and handle", arguments: StoreKind.subscriptionStores)
    func saveCreatesRefreshesConflicts(kind: StoreKind) async throws {
        let store = try await kind.makeSubscriptionStore().store
        let first = makeSubscription()
        guard case .created(let created) = try await store.save(first, allowUpdate: false) else { Issue.record("not created"); return }
        #expect(created.handle != nil)
        var again = first
        again.mode = .childEvent
        again.expiresAt = 2_100_000_000
        again.createdAt = 1_800_000_000
        #expect(try await store.save(again, allowUpdate: false) == .conflict(created))
        guard case .refreshed(let refreshed) = try await store.save(again, allowUpdate: true) else { Issue.record("not refreshed"); return }
        #expect(refreshed.handle == created.handle)
        #expect(refreshed.createdAt == first.createdAt)
        #expect(refreshed.mode == .childEvent && refreshed.expiresAt == 2_100_000_000)
        #expect(try await store.subscription(app: "toto", uid: "u1", id: first.id) == refreshed)
    }

    @Test("reads are scoped to the application and user", arguments: StoreKind.subscriptionStores)
    func scopedReads(kind: StoreKind) async throws {
        let store = try await kind.makeSubscriptionStore().store
        let mine = makeSubscription(path: "/x")
        let mineToo = makeSubscription(kind: .webhook, path: "/y", context: nil, destination: "orders")
        let theirs = makeSubscription(uid: "u2", path: "/x")
        let otherApp = makeSubscription(app: "other", path: "/x")
        for subscription in [mine, mineToo, theirs, otherApp] { _ = try await store.save(subscription, allowUpdate: false) }
        #expect(try await store.subscriptions(app: "toto", uid: "u1").map(\.id) == [mine.id, mineToo.id].sorted())
        #expect(try await store.subscription(app: "toto", uid: "u2", id: mine.id) == nil)
        #expect(try await store.subscription(app: "other", uid: "u1", id: mine.id) == nil)
        #expect(try await store.subscription(id: theirs.id)?.uid == "u2")
        let webhook = try await store.subscription(app: "toto", uid: "u1", id: mineToo.id)
        #expect(webhook?.tuple.destination == "orders" && webhook?.tuple.context == nil)
        #expect(try await store.countByKind() == [.fcm: 3, .webhook: 1])
        let page1 = try await store.subscriptions(app: nil, after: 0, limit: 3)
        let page2 = try await store.subscriptions(app: nil, after: page1.last!.handle!, limit: 3)
        #expect(page1.count == 3 && page2.count == 1)
        #expect(try await store.subscriptions(app: "other", after: 0, limit: 10).map(\.id) == [otherApp.id])
    }

    @Test("remove and expiration updates answer nil for unknown subscriptions", arguments: StoreKind.subscriptionStores)
    func removeAndUpdate(kind: StoreKind) async throws {
        let store = try await kind.makeSubscriptionStore().store
        let subscription = makeSubscription()
        _ = try await store.save(subscription, allowUpdate: false)
        #expect(try await store.updateExpiration(app: "toto", uid: "u1", id: subscription.id, expiresAt: 2_222_222_222, auth: nil)?.expiresAt == 2_222_222_222)
        #expect(try await store.updateExpiration(app: "toto", uid: "u9", id: subscription.id, expiresAt: 1, auth: nil) == nil)
        #expect(try await store.remove(app: "toto", uid: "u9", id: subscription.id) == nil)
        #expect(try await store.remove(app: "toto", uid: "u1", id: subscription.id)?.id == subscription.id)
        #expect(try await store.remove(app: "toto", uid: "u1", id: subscription.id) == nil)
        #expect(try await store.subscriptions(app: "toto", uid: "u1").isEmpty)
    }

    @Test(
        "the claims a subscription was allowed with are kept, replaced by a refresh, and a change of them is logged",
        arguments: StoreKind.subscriptionStores)
    func claims(kind: StoreKind) async throws {
        let store = try await kind.makeSubscriptionStore().store
        var subscription = makeSubscription()
        subscription.auth = ["sub": "u1", "admin": true, "groups": ["a", "b"]]
        guard case .created(let created) = try await store.save(subscription, allowUpdate: false) else { throw StoreError.corrupt("not created") }
        #expect(try await store.subscription(id: subscription.id)?.auth == subscription.auth)
        #expect(try await store.subscriptions(handles: [created.handle!])[created.handle!]?.auth == subscription.auth)
        let before = try await store.lastChange()
        // Same claims: nothing to tell the index. New claims: an update in the change log.
        _ = try await store.updateExpiration(app: "toto", uid: "u1", id: subscription.id, expiresAt: 2_222_222_222, auth: subscription.auth)
        #expect(try await store.lastChange() == before)
        let refreshed = try await store.updateExpiration(app: "toto", uid: "u1", id: subscription.id, expiresAt: 2_222_222_222, auth: ["sub": "u1"])
        #expect(refreshed?.auth == ["sub": "u1"])
        let changes = try await store.changes(after: before, limit: 10)
        #expect(changes.map(\.operation) == [.update] && changes.first?.handle == created.handle)
        subscription.auth = nil
        guard case .refreshed(let saved) = try await store.save(subscription, allowUpdate: true) else { throw StoreError.corrupt("not refreshed") }
        #expect(saved.auth == nil)
        #expect(try await store.subscription(id: subscription.id)?.auth == nil)
    }

    @Test("expiry: due subscriptions are listed, and removed with their revoke only if still due", arguments: StoreKind.all)
    func expiry(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let due = makeSubscription(path: "/due", expiresAt: 1_000)
        let dueToo = makeSubscription(path: "/due2", expiresAt: 1_500)
        let later = makeSubscription(path: "/later", expiresAt: 5_000)
        var handles: [String: Int64] = [:]
        for subscription in [due, dueToo, later] {
            if case .created(let created) = try await store.save(subscription, allowUpdate: false) { handles[created.id] = created.handle }
        }
        #expect(try await store.dueSubscriptions(now: 1_500, limit: 1).map(\.id) == [due.id])
        #expect(try await store.dueSubscriptions(now: 1_500, limit: 10).map(\.id) == [due.id, dueToo.id])
        // dueToo is refreshed before the sweep commits: it stays, and gets no revoke.
        var refreshed = dueToo
        refreshed.expiresAt = 9_000
        _ = try await store.save(refreshed, allowUpdate: true)
        var batch = CommitBatch(now: 1_500_000)
        for subscription in [due, dueToo] {
            batch.operations.append(
                .revoke(handle: handles[subscription.id]!, notification: entry(subscription, handles[subscription.id]!, .revoke), condition: .expiredBy(1_500)))
        }
        let result = try await store.commit(batch)
        #expect(result.revoked == [handles[due.id]!] && result.queued == 1)
        #expect(try await store.notifications(limit: 10).map(\.entry.subscriptionID) == [due.id])
        #expect(try await store.subscriptions(app: "toto", uid: "u1").map(\.id).sorted() == [dueToo.id, later.id].sorted())
    }

    @Test("every committed change is logged in order, with what the index needs", arguments: StoreKind.subscriptionStores)
    func changeLog(kind: StoreKind) async throws {
        let store = try await kind.makeSubscriptionStore().store
        let start = try await store.lastChange()
        let subscription = makeSubscription(mode: .value)
        guard case .created(let created) = try await store.save(subscription, allowUpdate: false) else {
            Issue.record("the first save did not create")
            return
        }
        var sameMode = subscription
        sameMode.expiresAt += 10
        _ = try await store.save(sameMode, allowUpdate: true)  // no index-relevant change
        var newMode = subscription
        newMode.mode = .noData
        _ = try await store.save(newMode, allowUpdate: true)
        _ = try await store.remove(app: "toto", uid: "u1", id: subscription.id)
        let changes = try await store.changes(after: start, limit: 10)
        #expect(changes.map(\.operation) == [.insert, .update, .delete])
        #expect(changes.map(\.mode) == [.value, .noData, .noData])
        #expect(changes.allSatisfy { $0.handle == created.handle && $0.app == "toto" && $0.path.string == "/a/b" })
        #expect(changes.map(\.sequence) == changes.map(\.sequence).sorted())
        let last = try await store.lastChange()
        #expect(last == changes.last!.sequence)
        try await store.pruneChanges(through: last)
        #expect(try await store.changes(after: last, limit: 10).isEmpty)
        #expect(try await store.lastChange() == last)  // sequences never go back
    }

    @Test("index records page through every subscription in handle order", arguments: StoreKind.subscriptionStores)
    func indexRecords(kind: StoreKind) async throws {
        let store = try await kind.makeSubscriptionStore().store
        for i in 0..<25 { _ = try await store.save(makeSubscription(path: "/p/\(i)", context: "t\(i)"), allowUpdate: false) }
        var records: [IndexRecord] = []
        var after: Int64 = 0
        while true {
            let page = try await store.indexRecords(after: after, limit: 7)
            if page.isEmpty { break }
            records += page
            after = page.last!.handle
        }
        #expect(records.count == 25)
        #expect(Set(records.map(\.path.string)) == Set((0..<25).map { "/p/\($0)" }))
        #expect(records.map(\.handle) == records.map(\.handle).sorted())
    }

    @Test("100 concurrent saves of one tuple create one subscription", arguments: StoreKind.subscriptionStores)
    func concurrentSaves(kind: StoreKind) async throws {
        let store = try await kind.makeSubscriptionStore().store
        let subscription = makeSubscription()
        let outcomes = try await withThrowingTaskGroup(of: SaveOutcome.self) { group in
            for i in 0..<100 {
                group.addTask { try await store.save(subscription, allowUpdate: i % 2 == 0) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let created = outcomes.filter { if case .created = $0 { return true } else { return false } }
        #expect(created.count == 1)
        #expect(try await store.subscriptions(app: "toto", uid: "u1").count == 1)
    }

    @Test("data survives reopening", arguments: StoreKind.subscriptionStores)
    func persistence(kind: StoreKind) async throws {
        let (store, reopen) = try await kind.makeSubscriptionStore()
        let subscription = makeSubscription()
        _ = try await store.save(subscription, allowUpdate: false)
        #expect(try await store.createServiceKeyIfNone(["kty": "EC", "kid": "k1"], kid: "k1").map { $0["kid"]!.stringValue! } == ["k1"])
        #expect(try await store.createServiceKeyIfNone(["kty": "EC", "kid": "k2"], kid: "k2").map { $0["kid"]!.stringValue! } == ["k1"])
        let again = try await reopen()
        #expect(try await again.subscription(id: subscription.id)?.tuple == subscription.tuple)
        #expect(try await again.loadServiceKeys().map { $0["kid"]!.stringValue! } == ["k1"])
    }

    @Test("handles are never reused, even the largest one after its deletion, across reopening", arguments: StoreKind.all)
    func handlesNeverReused(kind: StoreKind) async throws {
        let (store, reopen) = try await kind.make()
        var seen: Set<Int64> = []
        var largest: Int64 = 0
        func create(_ path: String, on store: any SubscriptionStore) async throws -> Subscription {
            guard case .created(let created) = try await store.save(makeSubscription(path: path), allowUpdate: false),
                let handle = created.handle
            else { throw StoreError.corrupt("not created") }
            #expect(!seen.contains(handle), "handle \(handle) was used before")
            #expect(handle > largest)
            seen.insert(handle)
            largest = max(largest, handle)
            return created
        }
        let a = try await create("/a", on: store)
        let b = try await create("/b", on: store)
        // Delete the newest (SQLite without AUTOINCREMENT hands its row id out again), then the other.
        _ = try await store.remove(app: "toto", uid: "u1", id: b.id)
        _ = try await create("/c", on: store)
        _ = try await store.remove(app: "toto", uid: "u1", id: a.id)
        let again = try await reopen()
        _ = try await create("/a", on: again)  // the same tuple as a, recreated: a new handle
        for subscription in try await again.subscriptions(app: "toto", uid: "u1") {
            var batch = CommitBatch(now: 0)
            batch.operations.append(.revoke(handle: subscription.handle!, notification: nil, condition: .exists))
            _ = try await again.commit(batch)
        }
        _ = try await create("/d", on: again)
    }

    @Test("a reader behind a prune is told it missed changes", arguments: StoreKind.subscriptionStores)
    func pruneGap(kind: StoreKind) async throws {
        let store = try await kind.makeSubscriptionStore().store
        let start = try await store.lastChange()
        for i in 0..<5 { _ = try await store.save(makeSubscription(path: "/p/\(i)"), allowUpdate: false) }
        let last = try await store.lastChange()
        try await store.pruneChanges(through: last - 2)
        await #expect(throws: StoreError.changeLogPruned(through: last - 2)) {
            _ = try await store.changes(after: start, limit: 10)
        }
        #expect(try await store.changes(after: last - 2, limit: 10).count == 2)
        // Pruning beyond the end prunes what exists; the watermark never moves back.
        try await store.pruneChanges(through: last + 100)
        try await store.pruneChanges(through: 1)
        #expect(try await store.changes(after: last, limit: 10).isEmpty)
        await #expect(throws: StoreError.changeLogPruned(through: last)) {
            _ = try await store.changes(after: last - 1, limit: 10)
        }
    }

    @Test("of processes starting together on one store, one service key is created", arguments: StoreKind.subscriptionStores)
    func serviceKeyOnce(kind: StoreKind) async throws {
        let (store, reopen) = try await kind.makeSubscriptionStore()
        var handles: [any ServiceKeyStore] = [store]
        for _ in 0..<3 { handles.append(try await reopen()) }
        let kids = try await withThrowingTaskGroup(of: [String].self) { group in
            for i in 0..<24 {
                let handle = handles[i % handles.count]
                group.addTask { try await ServiceKey.loadOrCreate(in: handle).map { $0.kid! } }
            }
            return try await group.reduce(into: [[String]]()) { $0.append($1) }
        }
        let stored = try await store.loadServiceKeys()
        #expect(stored.count == 1)
        #expect(Set(kids) == [[stored[0]["kid"]!.stringValue!]])
    }

    @Test("store errors are typed: the constraint and the subscription are named", arguments: StoreKind.subscriptionStores)
    func typedErrors(kind: StoreKind) async throws {
        let store = try await kind.makeSubscriptionStore().store
        let bad = makeSubscription(expiresAt: 0)
        do {
            _ = try await store.save(bad, allowUpdate: false)
            Issue.record("a subscription expiring at 0 was stored")
        } catch let error as StoreError {
            guard error.kind == .constraint, let constraint = error.detail else {
                Issue.record("expected a constraint error, got \(error)")
                return
            }
            #expect(constraint.contains("CHECK") || constraint.contains("check"))
            #expect(error.subscriptionID == bad.id)
        }
    }
}
