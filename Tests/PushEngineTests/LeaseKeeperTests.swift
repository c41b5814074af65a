import Dispatch
import Logging
import PushContracts
import PushCore
import PushStore
import PushTestSupport
@testable import PushEngine
import Testing

/// Leases on PostgreSQL, a round at a time: the applications are shared out among the live
/// instances, each held by one.
@Suite("Several instances: leases", .processLevel, .enabled(if: PostgresTestServer.enabled))
struct LeaseKeeperTests {
    @Test("an instance alone takes every application; once a second one beats, one is given back and the second takes it")
    func shares() async throws {
        let url = try ClusterInstance.database()
        let a = try await ClusterInstance("node-a", url: url, applications: ["toto", "titi"])
        let b = try await ClusterInstance("node-b", url: url, applications: ["toto", "titi"])
        defer { a.store.close(); b.store.close() }

        try await a.keeper.round()
        #expect(a.keeper.leases.keys.sorted() == ["titi", "toto"])
        // B beats: its share is one, but both are held (and live).
        try await b.keeper.round()
        #expect(b.keeper.leases.isEmpty)
        // A gives back the one it prefers least; B takes it at its next round.
        try await a.keeper.round()
        let given = ["titi", "toto"].min { a.keeper.preference($0) < a.keeper.preference($1) }
        #expect(a.keeper.leases.count == 1)
        #expect(a.keeper.leases[given ?? ""] == nil)
        try await b.keeper.round()
        #expect(b.keeper.leases.keys.sorted() == [given].compactMap { $0 })
        let stored = try await a.store.leases().filter { $0.expiresAt > 0 }
        #expect(Set(stored.map(\.app)) == ["titi", "toto"])
        // Renewed, each keeps its own.
        let tokens = (a.keeper.leases, b.keeper.leases)
        try await a.keeper.round()
        try await b.keeper.round()
        #expect(a.keeper.leases == tokens.0)
        #expect(b.keeper.leases == tokens.1)
    }

    @Test("the heartbeat beats beside a slow round (six takeovers, each waiting for a commit on its lease row): the claims' tenure never lapses (issue 33)")
    func heartbeatBesideSlowRounds() async throws {
        let server = try PostgresTestServer.shared.get()
        let url = try server.createDatabase()
        let name = String(url.split(separator: "/").last!)
        let apps = (1...6).map { "app\($0)" }
        let other = try await PostgresStore.open(url: url, logger: ClusterInstance.logger)
        let store = try await PostgresStore.open(url: url, logger: ClusterInstance.logger)
        defer { other.close(); store.close() }
        for app in apps { _ = try #require(try await other.acquireLease(app: app, holder: "node-x", ttl: 300)) }
        // node-x's commit, still running: its lease rows locked for 12 s, after the leases expired.
        DispatchQueue.global().async {
            _ = try? server.psql(name, "BEGIN; SELECT app FROM app_lease WHERE owner = 'node-x' FOR SHARE; SELECT pg_sleep(12); COMMIT;")
        }
        try await Task.sleep(for: .milliseconds(1_000))
        let clock = SystemClock()
        let tenure = ClaimTenure(staleAfter: 5_000, margin: 1_000)
        let keeper = LeaseKeeper(
            store: store, instance: "node-a", address: AdvertisedAddress("node-a:1"), applications: apps, changed: Wakeup(), outbox: OutboxBell(),
            tenure: tenure, clock: clock, logger: ClusterInstance.logger)
        let running = Task { try await keeper.run() }
        defer { running.cancel() }
        let start = ContinuousClock.now
        while !tenure.holds(at: clock.now), ContinuousClock.now - start < .seconds(10) { try await Task.sleep(for: .milliseconds(20)) }
        #expect(tenure.holds(at: clock.now), "no heartbeat in 10 s")
        // Each round waits about 1 s on each of the six rows (the takeover's lock timeout):
        // longer than the tenure a single heartbeat per round would give.
        var lapses = 0
        let watched = ContinuousClock.now
        while ContinuousClock.now - watched < .seconds(9) {
            if !tenure.holds(at: clock.now) { lapses += 1 }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(lapses == 0, "the tenure lapsed \(lapses) times in 9 s")
        #expect(keeper.leases.isEmpty, "the rows were locked: nothing taken")
    }

    @Test("a lease the store said was lost is forgotten at once; a graceful stop gives back the leases held, which another instance takes at its next round")
    func lostAndReleased() async throws {
        let url = try ClusterInstance.database()
        let a = try await ClusterInstance("node-a", url: url, applications: ["toto", "titi"])
        let b = try await ClusterInstance("node-b", url: url, applications: ["toto", "titi"])
        defer { a.store.close(); b.store.close() }
        try await a.keeper.round()
        a.keeper.lost("toto")
        #expect(a.keeper.leases.keys.sorted() == ["titi"])
        await a.keeper.releaseAll()
        #expect(a.keeper.leases.isEmpty)
        // Toto's row is still A's until it expires (here, only A forgot it); titi was given back.
        try await b.keeper.round()
        #expect(b.keeper.leases.keys.sorted() == ["titi"])
    }
}
