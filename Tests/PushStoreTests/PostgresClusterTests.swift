import Foundation
import Logging
import PushCore
import PushContracts
@testable import PushStore
import PushTestSupport
import Synchronization
import Testing

/// What several instances on one PostgreSQL database rely on, each with its own handle on the
/// database as separate processes would have: the change log read in commit order under
/// concurrent writers, fenced commits under application leases, claims side by side, the
/// inbox.
@Suite("PostgreSQL: several instances on one database", .processLevel, .enabled(if: StoreKind.all.contains(.postgres)))
struct PostgresClusterTests {
    static let logger = Logger(label: "postgres-test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Two handles on one fresh database (two instances).
    func two() async throws -> (PostgresStore, PostgresStore) {
        let url = try PostgresTestServer.shared.get().createDatabase()
        return (try await PostgresStore.open(url: url, logger: Self.logger), try await PostgresStore.open(url: url, logger: Self.logger))
    }

    @Test("a follower reading the change log while 8 writers commit side by side never skips a change")
    func followerNeverSkips() async throws {
        let (writerStore, followerStore) = try await two()
        defer { writerStore.close(); followerStore.close() }
        let done = Atomic<Bool>(false)
        async let followed: [Int64] = {
            var seen: [Int64] = []
            var after: Int64 = 0
            while true {
                let finished = done.load(ordering: .acquiring)
                let changes = try await followerStore.changes(after: after, limit: 50)
                seen += changes.map(\.sequence)
                after = changes.last?.sequence ?? after
                if finished && changes.isEmpty { return seen }
            }
        }()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for n in 0..<40 {
                        let subscription = makeSubscription(uid: "w\(writer)", path: "/w\(writer)/\(n)", context: "t\(writer)-\(n)")
                        _ = try await writerStore.save(subscription, allowUpdate: false)
                        if n % 3 == 0 { _ = try await writerStore.remove(app: "toto", uid: "w\(writer)", id: subscription.id) }
                    }
                }
            }
            try await group.waitForAll()
        }
        done.store(true, ordering: .releasing)
        let seen = try await followed
        let all = try await writerStore.changes(after: 0, limit: 10_000).map(\.sequence)
        #expect(all.count == 8 * (40 + 14))
        // Read while they committed: every change, once, in order — none passed by.
        #expect(seen == all)
        #expect(try await writerStore.lastChange() == all.last)
    }

    @Test("a commit under a lease lost to another instance writes nothing; the records stay for the new owner")
    func fencing() async throws {
        let (a, b) = try await two()
        defer { a.close(); b.close() }
        let subscription = makeSubscription(mode: .childEvent)
        guard case .created(let created) = try await a.save(subscription, allowUpdate: false), let handle = created.handle else {
            Issue.record("not created")
            return
        }
        try await a.enqueue(
            [InboxRecord(app: "toto", source: "node-1/socket", position: 1, line: Array(#"{"seq":1}"#.utf8))],
            checkpoints: [SourceCheckpoint(source: "node-1/socket", lastSeq: 1)])
        let records = try await a.inbox(app: "toto", limit: 10)
        #expect(records.count == 1)
        #expect(try await a.checkpoints() == [SourceCheckpoint(source: "node-1/socket", lastSeq: 1)])

        let tokenA = try #require(try await a.acquireLease(app: "toto", holder: "node-1", ttl: 60_000))
        // Live: nobody else gets it.
        #expect(try await b.acquireLease(app: "toto", holder: "node-2", ttl: 60_000) == nil)
        #expect(try await a.renewLeases(holder: "node-1", ttl: 60_000) == ["toto": tokenA])

        // node-1 pauses past its lease; node-2 takes over.
        try await b.releaseLease(app: "toto", holder: "node-1")
        let tokenB = try #require(try await b.acquireLease(app: "toto", holder: "node-2", ttl: 60_000))
        #expect(tokenB == tokenA + 1)
        #expect(try await a.renewLeases(holder: "node-1", ttl: 60_000).isEmpty)

        var batch = CommitBatch(now: 10)
        batch.operations = [.notify(entry(subscription, handle, .childEvent))]
        batch.journal = ["toto": Array("{\"seq\":1}\n".utf8)]
        let lost = LeaseFence(app: "toto", token: tokenA, holder: "node-1", consumed: records.map(\.id))
        await #expect(throws: StoreError.leaseLost(app: "toto")) { try await a.commit(batch, fence: lost) }
        #expect(try await a.notifications(limit: 10).isEmpty)
        #expect(try await a.inbox(app: "toto", limit: 10).count == 1)
        #expect(try await a.tree(app: "toto").journal.isEmpty)

        // The new owner commits under its token.
        let held = LeaseFence(app: "toto", token: tokenB, holder: "node-2", consumed: records.map(\.id))
        #expect(try await b.commit(batch, fence: held).queued == 1)
        #expect(try await b.inbox(app: "toto", limit: 10).isEmpty)
        #expect(try await b.leases().map(\.owner) == ["node-2"])
    }

    final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    /// node-1 takes toto's lease for 300 ms on `store` and opens a fenced transaction under it,
    /// held open after its check: silent (its client sends nothing more, as when its link is
    /// cut) or busy in a statement of `busySeconds`. Returns once the lease has expired, its row
    /// still locked.
    func holdExpiredLease(_ store: PostgresStore, busySeconds: Int? = nil) async throws -> (token: Int64, holder: Task<Void, any Error>) {
        let token = try #require(try await store.acquireLease(app: "toto", holder: "node-1", ttl: 300))
        let fence = LeaseFence(app: "toto", token: token, holder: "node-1", consumed: [])
        let checked = Flag()
        let holder = Task {
            try await store.transaction(writerLock: false) { session in
                try await store.check(fence, session)
                checked.value.store(true, ordering: .releasing)
                if let busySeconds {
                    try await session.query("SELECT pg_sleep(\(busySeconds))").collect()
                } else {
                    try await Task.sleep(for: .seconds(60))
                }
            }
        }
        while !checked.value.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(400))
        return (token, holder)
    }

    @Test("a fenced commit whose instance went silent mid-transaction is ended by the server: another instance takes the application over, and no takeover waits behind it (issue 33: the partition test's freeze)")
    func silentCommitEnded() async throws {
        let (a, b) = try await two()
        defer { a.close(); b.close() }
        let (token, holder) = try await holdExpiredLease(a)
        defer { holder.cancel() }
        let start = ContinuousClock.now
        var slowest = Duration.zero
        var taken: Int64?
        while taken == nil, ContinuousClock.now - start < .seconds(30) {
            let attempt = ContinuousClock.now
            taken = try await b.acquireLease(app: "toto", holder: "node-2", ttl: 60_000)
            slowest = max(slowest, ContinuousClock.now - attempt)
            if taken == nil { try await Task.sleep(for: .milliseconds(200)) }
        }
        let waited = ContinuousClock.now - start
        // Before: the takeover waited on the row as long as the silent session lived (here the
        // 60 s of its sleep; after a real cut, until TCP gave up).
        #expect(taken == token + 1, "not taken over in 30 s")
        #expect(waited < .milliseconds(Int64(PostgresURL.idleInTransactionTimeout) + 4_000), "taken over after \(waited)")
        // Each attempt gave up after the lock timeout instead of blocking its caller's round.
        #expect(slowest < .milliseconds(Int64(PostgresStore.leaseLockTimeout) + 2_000), "an attempt took \(slowest)")
        #expect(try await b.leases().map(\.owner) == ["node-2"])
    }

    @Test("a takeover does not wait behind a fenced commit still running: it gives up after the lock timeout and takes the lease once the commit ended")
    func takeoverDoesNotWaitForARunningCommit() async throws {
        let (a, b) = try await two()
        defer { a.close(); b.close() }
        let (token, holder) = try await holdExpiredLease(a, busySeconds: 6)
        let attempt = ContinuousClock.now
        #expect(try await b.acquireLease(app: "toto", holder: "node-2", ttl: 60_000) == nil)
        let took = ContinuousClock.now - attempt
        #expect(took >= .milliseconds(Int64(PostgresStore.leaseLockTimeout) - 100) && took < .milliseconds(Int64(PostgresStore.leaseLockTimeout) + 2_000), "\(took)")
        try await holder.value  // the commit ends normally (not idle: a statement was running)
        #expect(try await b.acquireLease(app: "toto", holder: "node-2", ttl: 60_000) == token + 1)
    }

    @Test("a late snapshot from an ex-owner never replaces the new owner's later one")
    func snapshotsMoveForward() async throws {
        let (a, b) = try await two()
        defer { a.close(); b.close() }
        var ids: [Int64] = []
        for n in 1...2 {
            var batch = CommitBatch(now: 1)
            batch.journal = ["toto": Array("{\"seq\":\(n)}\n".utf8)]
            ids.append(try #require(try await a.commit(batch).journalIDs["toto"]))
        }
        // The new owner snapshots through both rows; the ex-owner's older snapshot lands after.
        try await b.saveSnapshot(app: "toto", tree: Array(#"{"n":2}"#.utf8), through: ids[1])
        try await a.saveSnapshot(app: "toto", tree: Array(#"{"n":1}"#.utf8), through: ids[0])
        let stored = try await a.tree(app: "toto")
        #expect(stored.snapshot == Array(#"{"n":2}"#.utf8))
        #expect(stored.snapshotThrough == ids[1])
        #expect(stored.journal.isEmpty)
    }

    @Test("two instances claiming side by side share the heads of the subscriptions, each once")
    func claimsSideBySide() async throws {
        let (a, b) = try await two()
        defer { a.close(); b.close() }
        var entries: [OutboxEntry] = []
        for n in 0..<40 {
            let subscription = makeSubscription(path: "/s/\(n)", context: "token-\(n)", mode: .childEvent)
            guard case .created(let created) = try await a.save(subscription, allowUpdate: false), let handle = created.handle else { return }
            for k in 0..<3 { entries.append(entry(subscription, handle, .childEvent, payload: "\(n)-\(k)")) }
        }
        var batch = CommitBatch(now: 10)
        batch.operations = entries.map { .notify($0) }
        _ = try await a.commit(batch)
        async let fromA = a.claim(now: 10, limit: 30, claimant: "node-1", leaseUntil: 60_000, excluding: [])
        async let fromB = b.claim(now: 10, limit: 30, claimant: "node-2", leaseUntil: 60_000, excluding: [])
        let claimed = try await fromA + fromB
        // Only the oldest of each subscription, and no row twice.
        #expect(Set(claimed.map(\.id)).count == claimed.count)
        #expect(claimed.allSatisfy { String(decoding: $0.entry.payload, as: UTF8.self).hasSuffix("-0") })
        #expect(Set(claimed.map(\.entry.subscriptionHandle)).count == claimed.count)
        let rest = try await b.claim(now: 10, limit: 100, claimant: "node-2", leaseUntil: 60_000, excluding: [])
        #expect(claimed.count + rest.count == 40)

        // An instance that stopped beating: its claims are released for the others.
        _ = try await a.heartbeat(instance: "node-1", address: "127.0.0.1:1")
        _ = try await a.heartbeat(instance: "node-2", address: "127.0.0.1:2")
        #expect(try await a.releaseClaimsOfStaleInstances(staleAfter: 60_000) == 0)
        #expect(Set(try await a.instances(within: 60_000).map(\.name)) == ["node-1", "node-2"])
    }

    @Test("claims are timed by the database's clock: a claimant 10 minutes ahead takes no claim in flight, one 10 minutes behind keeps its own")
    func claimsByTheDatabaseClock() async throws {
        let (a, b) = try await two()
        defer { a.close(); b.close() }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let (lease, tenMinutes): (Int64, Int64) = (300_000, 600_000)
        var subscriptions: [(Subscription, Int64)] = []
        for n in 1...2 {
            let subscription = makeSubscription(path: "/c/\(n)", context: "token-c\(n)", mode: .childEvent)
            guard case .created(let created) = try await a.save(subscription, allowUpdate: false), let handle = created.handle else { return }
            subscriptions.append((subscription, handle))
        }
        func queue(_ index: Int, at time: Int64) async throws {
            var batch = CommitBatch(now: time)
            batch.operations = [.notify(entry(subscriptions[index].0, subscriptions[index].1, .childEvent, payload: "\(index)"))]
            _ = try await a.commit(batch)
        }
        // node-1, its clock right, claims a notification for 5 minutes; node-2, 10 minutes
        // ahead, must not take it while it is in flight (it did, by its own clock, before issue 33).
        try await queue(0, at: now)
        #expect(try await a.claim(now: now, limit: 10, claimant: "node-1", leaseUntil: now + lease, excluding: []).count == 1)
        #expect(try await b.claim(now: now + tenMinutes, limit: 10, claimant: "node-2", leaseUntil: now + tenMinutes + lease, excluding: []).isEmpty)
        // node-3, 10 minutes behind, claims one for 5 minutes: the others must not take it
        // (its claim had ended 5 minutes ago by their clocks).
        try await queue(1, at: now - tenMinutes)
        let behind = try await b.claim(now: now - tenMinutes, limit: 10, claimant: "node-3", leaseUntil: now - tenMinutes + lease, excluding: [])
        #expect(behind.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["1"])
        #expect(try await a.claim(now: now, limit: 10, claimant: "node-1", leaseUntil: now + lease, excluding: []).isEmpty)
        #expect(try await a.claim(now: now + tenMinutes, limit: 10, claimant: "node-2", leaseUntil: now + tenMinutes + lease, excluding: []).isEmpty)
    }

    @Test("each instance's report is written with its heartbeat and read by the others; a heartbeat alone keeps it; an oversized one is not written")
    func instanceReports() async throws {
        let (a, b) = try await two()
        defer { a.close(); b.close() }
        _ = try await a.heartbeat(instance: "node-1", address: "127.0.0.1:1", report: Array(#"{"senders":[1]}"#.utf8))
        _ = try await b.heartbeat(instance: "node-2", address: "127.0.0.1:2", report: nil)
        var reports = try await b.instanceReports(within: 60_000)
        #expect(reports.mapValues { String(decoding: $0, as: UTF8.self) } == ["node-1": #"{"senders":[1]}"#], "node-2 wrote none")
        _ = try await a.heartbeat(instance: "node-1", address: "127.0.0.1:1")
        _ = try await a.heartbeat(instance: "node-1", address: "127.0.0.1:1", report: [UInt8](repeating: UInt8(ascii: " "), count: InstanceReport.maximumBytes + 1))
        _ = try await b.heartbeat(instance: "node-2", address: "127.0.0.1:2", report: Array("{}".utf8))
        reports = try await a.instanceReports(within: 60_000)
        #expect(reports.mapValues { String(decoding: $0, as: UTF8.self) } == ["node-1": #"{"senders":[1]}"#, "node-2": "{}"])
        try await a.retire(instance: "node-1")
        #expect(Array(try await b.instanceReports(within: 60_000).keys) == ["node-2"], "a retiring instance's report is left out")
        #expect(try await b.instanceReports(within: -60_000).isEmpty, "as are stale ones")
    }

    @Test("a resume announced by one instance reaches every listener; notices that are not one are ignored")
    func resumeAnnounced() async throws {
        let (a, b) = try await two()
        defer { a.close(); b.close() }
        let heard = Mutex<[SenderKey]>([])
        let listening = Task { await b.listen({ _ in }, resumed: { key in heard.withLock { $0.append(key) } }) }
        defer { listening.cancel() }
        let expected = [SenderKey(app: "toto", kind: .webhook, destination: "orders"), SenderKey(app: "toto", kind: .fcm)]
        let deadline = Date().addingTimeInterval(10)
        // The listener connects in the background: announce until both are heard.
        while heard.withLock({ Set($0) }) != Set(expected), Date() < deadline {
            for key in expected { await a.announce(resumed: key) }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(heard.withLock { Set($0) } == Set(expected))
        #expect(PostgresStore.resumed(PostgresStore.resumeNotice(expected[0])) == expected[0])
        for bad in ["resume", "resume {", #"resume {"app":"a","kind":"carrier-pigeon"}"#, #"resume {"app":"a","kind":"webhook"}"#, #"resume {"kind":"fcm"}"#, "outbox!", #"resume ["a"]"#] {
            #expect(PostgresStore.resumed(bad) == nil, "\(bad)")
        }
    }
}
