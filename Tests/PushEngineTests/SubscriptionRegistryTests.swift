import Foundation
import Synchronization
import Logging
import PushCore
import PushJOSE
import PushStore
@testable import PushEngine
import Testing

@Suite("The index follows the store")
struct SubscriptionRegistryTests {
    func subscription(_ path: String, uid: String = "u1", mode: Mode = .value) -> Subscription {
        let tuple = SubscriptionTuple(app: "toto", uid: uid, kind: .mobile, destination: nil, path: try! Path(path), context: "t")
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
}
