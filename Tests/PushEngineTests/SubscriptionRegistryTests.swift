import Foundation
import Synchronization
import Logging
import PushCore
import PushContracts
import PushJSON
import PushJOSE
import PushStore
@testable import PushEngine
import Testing

@Suite("The index follows the store")
struct SubscriptionRegistryTests {
    func subscription(_ path: String, uid: String = "u1", mode: Mode = .value) -> Subscription {
        let tuple = SubscriptionTuple(app: "toto", uid: uid, kind: .fcm, destination: nil, path: try! Path(path), context: "t")
        return Subscription(
            id: SubscriptionID.derive(tuple), tuple: tuple, mode: mode, format: .v2, encryption: nil, createdAt: 1, expiresAt: 9_999_999_999)
    }

    func matches(_ registry: SubscriptionRegistry, _ path: String) -> [String] {
        registry.withIndex { index in
            var found: [String] = []
            index.forEachMatch(app: "toto", path: try! Path(path)) { _, node, entries in
                for entry in entries { found.append("\(index.path(of: node)) \(entry.mode.rawValue)") }
            }
            return found.sorted()
        }
    }

    @Test("loading, own changes and changes made by another process all reach the index")
    func follows() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("store.db").path
        let store = try SQLiteStore(path: path)
        _ = try await store.save(subscription("/a"), allowUpdate: false)
        _ = try await store.save(subscription("/a/b/c"), allowUpdate: false)
        let registry = SubscriptionRegistry(store: store, logger: Logger(label: "test"))
        try await registry.load()
        #expect(registry.count == 2)
        #expect(matches(registry, "/a/b") == ["/a value", "/a/b/c value"])

        // Another handle on the same database: an operator's command, another process.
        let other = try SQLiteStore(path: path)
        _ = try await other.save(subscription("/a/b", uid: "u2"), allowUpdate: false)
        _ = try await other.save(subscription("/a", mode: .childEvent), allowUpdate: true)
        _ = try await other.remove(app: "toto", uid: "u1", id: subscription("/a/b/c").id)
        try await registry.sync()
        #expect(registry.count == 2)
        #expect(matches(registry, "/a/b") == ["/a childEvent", "/a/b value"])
        #expect(registry.appliedChange == (try await store.lastChange()))

        // Syncing again changes nothing; expiry goes through the log too.
        try await registry.sync()
        #expect(registry.count == 2)
        var batch = CommitBatch(now: 0)
        for subscription in try await store.dueSubscriptions(now: 99_999_999_999, limit: 10) {
            batch.operations.append(.revoke(handle: subscription.handle!, notification: nil, condition: .expiredBy(99_999_999_999)))
        }
        _ = try await store.commit(batch)
        try await registry.sync()
        #expect(registry.count == 0)
        #expect(matches(registry, "/a/b").isEmpty)
    }

    /// Counts its wake-ups.
    final class Alarm: Wakeable {
        let rings = Mutex(0)
        func wake() { rings.withLock { $0 += 1 } }
    }

    @Test("new and changed subscriptions wait for their admission only in applications whose rules read data, and wake the engine")
    func admissions() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let store = try SQLiteStore(path: folder.appendingPathComponent("store.db").path)
        let alarm = Alarm()
        let registry = SubscriptionRegistry(store: store, admitting: ["toto"], admissionsWaiting: alarm, logger: Logger(label: "test"))
        try await registry.load()
        guard case .created(let created) = try await store.save(subscription("/a"), allowUpdate: false) else {
            Issue.record("not created")
            return
        }
        var elsewhere = subscription("/a")
        elsewhere.tuple.app = "other"
        elsewhere.id = SubscriptionID.derive(elsewhere.tuple)
        _ = try await store.save(elsewhere, allowUpdate: false)
        try await registry.sync()
        #expect(registry.takeAdmissions() == [created.handle!: "toto"])
        #expect(alarm.rings.withLock { $0 } == 1)
        #expect(registry.takeAdmissions().isEmpty)
        // Only the other application changes: nothing waits, nobody is woken.
        elsewhere.expiresAt += 1
        _ = try await store.save(elsewhere, allowUpdate: true)
        try await registry.sync()
        #expect(registry.takeAdmissions().isEmpty)
        #expect(alarm.rings.withLock { $0 } == 1)
    }

    @Test("an index behind a prune of the change log reloads from the table instead of missing changes")
    func reloadsAfterGap() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("store.db").path
        let store = try SQLiteStore(path: path)
        _ = try await store.save(subscription("/a"), allowUpdate: false)
        let registry = SubscriptionRegistry(store: store, logger: Logger(label: "test"))
        try await registry.load()
        #expect(matches(registry, "/") == ["/a value"])

        // Another process changes subscriptions and prunes the log past this index.
        let other = try SQLiteStore(path: path)
        _ = try await other.save(subscription("/b"), allowUpdate: false)
        _ = try await other.save(subscription("/a", mode: .noData), allowUpdate: true)
        _ = try await other.save(subscription("/c"), allowUpdate: false)
        _ = try await other.remove(app: "toto", uid: "u1", id: subscription("/c").id)
        let last = try await other.lastChange()
        try await other.pruneChanges(through: last)

        try await registry.sync()
        #expect(matches(registry, "/") == ["/a noData", "/b value"])
        #expect(registry.count == 2)
        #expect(registry.appliedChange == last)
        // And it follows again from there.
        _ = try await other.save(subscription("/d"), allowUpdate: false)
        try await registry.sync()
        #expect(matches(registry, "/") == ["/a noData", "/b value", "/d value"])
    }

    /// A store that counts the reads of its change log.
    final class CountingStore: SubscriptionStore {
        let store: SQLiteStore
        let reads = Mutex(0)
        init(_ store: SQLiteStore) { self.store = store }
        func save(_ subscription: Subscription, allowUpdate: Bool) async throws -> SaveOutcome { try await store.save(subscription, allowUpdate: allowUpdate) }
        func save(_ subscription: Subscription, allowUpdate: Bool, maxPerUser: Int?) async throws -> SaveOutcome {
            try await store.save(subscription, allowUpdate: allowUpdate, maxPerUser: maxPerUser)
        }
        func subscription(app: String, uid: String, id: String) async throws -> Subscription? { try await store.subscription(app: app, uid: uid, id: id) }
        func subscriptions(app: String, uid: String) async throws -> [Subscription] { try await store.subscriptions(app: app, uid: uid) }
        func subscriptions(app: String?, after handle: Int64, limit: Int) async throws -> [Subscription] {
            try await store.subscriptions(app: app, after: handle, limit: limit)
        }
        func subscription(id: String) async throws -> Subscription? { try await store.subscription(id: id) }
        func subscriptions(handles: [Int64]) async throws -> [Int64: Subscription] { try await store.subscriptions(handles: handles) }
        func remove(app: String, uid: String, id: String) async throws -> Subscription? { try await store.remove(app: app, uid: uid, id: id) }
        func updateExpiration(app: String, uid: String, id: String, expiresAt: Int64, auth: JSON?) async throws -> Subscription? {
            try await store.updateExpiration(app: app, uid: uid, id: id, expiresAt: expiresAt, auth: auth)
        }
        func indexRecords(after handle: Int64, limit: Int) async throws -> [IndexRecord] { try await store.indexRecords(after: handle, limit: limit) }
        func changes(after sequence: Int64, limit: Int) async throws -> [SubscriptionChange] {
            reads.withLock { $0 += 1 }
            return try await store.changes(after: sequence, limit: limit)
        }
        func lastChange() async throws -> Int64 { try await store.lastChange() }
        func pruneChanges(through sequence: Int64) async throws { try await store.pruneChanges(through: sequence) }
        func countByKind() async throws -> [SubscriptionKind: Int] { try await store.countByKind() }
    }

    @Test("concurrent catch-ups share their reads of the log, and each still sees its own write")
    func sharedCatchUps() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let store = CountingStore(try SQLiteStore(path: folder.appendingPathComponent("store.db").path))
        let registry = SubscriptionRegistry(store: store, logger: Logger(label: "test"))
        try await registry.load()
        let before = store.reads.withLock { $0 }
        let writers = 300
        let seen = try await withThrowingTaskGroup(of: Bool.self) { group in
            for number in 0..<writers {
                group.addTask {
                    _ = try await store.save(subscription("/w/\(number)"), allowUpdate: false)
                    await registry.catchUp()
                    // Read-your-writes: the catch-up returned after a read that saw this save.
                    return matches(registry, "/w/\(number)") == ["/w/\(number) value"]
                }
            }
            return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(seen == writers)
        #expect(registry.count == writers)
        #expect(store.reads.withLock { $0 } - before < 2 * writers)
        // 300 catch-ups at once, after 300 writes: one read (and the read that finds the end of
        // the log) serves those that came first, one more those that came during it. Before,
        // each catch-up read the log itself: 300 reads or more.
        for number in writers..<(2 * writers) { _ = try await store.save(subscription("/w/\(number)"), allowUpdate: false) }
        let start = store.reads.withLock { $0 }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<writers { group.addTask { await registry.catchUp() } }
        }
        #expect(registry.count == 2 * writers)
        let reads = store.reads.withLock { $0 } - start
        #expect(reads <= 30, "\(reads) reads of the log for \(writers) catch-ups at once")
    }
}
