import PushCore
import PushStore
import PushTestSupport
@testable import PushEngine
import Testing

/// An application's owner on PostgreSQL: it processes the inbox in order under its lease, a
/// new owner goes on from the committed tree, and a commit after the lease moved writes nothing.
@Suite("Several instances: application owners", .processLevel, .enabled(if: PostgresTestServer.enabled))
struct ApplicationOwnerTests {
    typealias F = EngineFixture

    static let records = [F.put(1, "/a/x", "1"), F.put(2, "/a/y", "2"), F.put(3, "/a/x", "3"), F.put(4, "/a/z", "4")]

    @Test("a new owner takes the application, loads its committed tree and goes on from the inbox in order")
    func takeover() async throws {
        let url = try ClusterInstance.database()
        var a = try await ClusterInstance("node-a", url: url, batchLines: 2)
        var b = try await ClusterInstance("node-b", url: url)
        defer { a.store.close(); b.store.close() }
        let handle = try F.handle(try await F.subscribe("/a", in: a.store))
        try await a.enqueue(Self.records, seqs: [1, 2, 3, 4])

        try await a.keeper.round()
        let first = try #require(a.keeper.leases["toto"])
        #expect(await a.process())
        // Two records (its batch), committed with their removal from the inbox.
        #expect(try await F.outbox(a.store).map { $0.prefix(2) } == ["1|", "2|"])
        #expect(try await F.inbox(a.store) == [3, 4])

        // A stops; B takes the application over.
        await a.keeper.releaseAll()
        try await b.keeper.round()
        let second = try #require(b.keeper.leases["toto"])
        #expect(second > first)
        #expect(await b.process())
        #expect(b.holding.loaded == ["toto": second])
        #expect(try await F.inbox(a.store).isEmpty)
        // Record 3 changes x, which record 1 (processed by A) added: B's tree is A's.
        #expect(
            try await F.outbox(b.store) == [
                #"1|\#(handle)|{"s":"OK","t":"childEvent","app":"toto","sp":"/a","added":"{\"x\":1}","removed":"[]","changed":"{}"}"#,
                #"2|\#(handle)|{"s":"OK","t":"childEvent","app":"toto","sp":"/a","added":"{\"y\":2}","removed":"[]","changed":"{}"}"#,
                #"3|\#(handle)|{"s":"OK","t":"childEvent","app":"toto","sp":"/a","added":"{}","removed":"[]","changed":"{\"x\":3}"}"#,
                #"4|\#(handle)|{"s":"OK","t":"childEvent","app":"toto","sp":"/a","added":"{\"z\":4}","removed":"[]","changed":"{}"}"#,
            ])
        #expect(try await b.store.tree(app: "toto").journal.count == 2)
    }

    @Test("a batch committed after the lease moved writes nothing; the owner gives the application up and the new owner processes it")
    func leaseLostMidBatch() async throws {
        let url = try ClusterInstance.database()
        var a = try await ClusterInstance("node-a", url: url)
        var b = try await ClusterInstance("node-b", url: url)
        defer { a.store.close(); b.store.close() }
        let kept = try F.handle(try await F.subscribe("/a", uid: "u1", in: a.store))
        let revoked = try F.handle(try await F.subscribe("/a", uid: "u2", in: a.store))
        try await a.keeper.round()
        #expect(a.keeper.leases.keys.sorted() == ["toto"])
        try await a.enqueue([#"{"seq":1,"app":"toto","op":"revoke","uid":"u2","reason":"disabled"}"#, F.put(2, "/a/x", "1")], seqs: [1, 2])

        // The lease moves to B behind A's back (A was paused past its lease).
        try await a.store.releaseLease(app: "toto", holder: "node-a")
        try await b.keeper.round()
        #expect(b.keeper.leases.keys.sorted() == ["toto"])

        #expect(await a.process() == false)
        #expect(a.keeper.leases.isEmpty)
        #expect(a.holding.loaded.isEmpty)
        #expect(try await F.outbox(a.store).isEmpty)
        #expect(try await F.inbox(a.store) == [1, 2])
        #expect(try await a.store.tree(app: "toto").journal.isEmpty)
        #expect(try await a.store.subscriptions(handles: [kept, revoked]).keys.sorted() == [kept, revoked])
        // What the batch would have done to A's index was not applied: u2 is still there.
        #expect(F.indexed(a.registry, [kept, revoked]) == [kept, revoked])

        #expect(await b.process())
        let outbox = try await F.outbox(b.store)
        #expect(outbox.map { $0.split(separator: "|").prefix(2).joined(separator: "|") } == ["1|\(revoked)", "2|\(kept)"])
        #expect(outbox.first?.hasSuffix(#"{"t":"revoke","r":"disabled","app":"toto","sp":"/a"}"#) == true)
        #expect(try await b.store.subscriptions(handles: [kept, revoked]).keys.sorted() == [kept])
        #expect(F.indexed(b.registry, [kept, revoked]) == [kept])
    }
}
