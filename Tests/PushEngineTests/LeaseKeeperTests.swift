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
