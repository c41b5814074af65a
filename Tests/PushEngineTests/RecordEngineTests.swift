import PushCore
import PushContracts
import PushStore
@testable import PushEngine
import Testing

/// The record engine's batches, prepared and committed through the ``BatchWriter`` into a real
/// SQLite store: what a batch holds, and what its commit leaves in the store and the index.
@Suite("The record engine")
struct RecordEngineTests {
    typealias F = EngineFixture

    @Test("subscriptions waiting for admission are admitted or revoked with permission_denied in the same batch as the records")
    func admissions() async throws {
        let fixture = try await F(admitting: ["toto"])
        let alice = try F.handle(try await fixture.subscribe("/rooms/r1", uid: "alice", mode: .value))
        let carol = try F.handle(try await fixture.subscribe("/rooms/r1", uid: "carol", mode: .value))
        let waiting = fixture.registry.takeAdmissions()
        #expect(waiting == [alice: "toto", carol: "toto"])
        var engine = try fixture.engine(settings: Membership.settings, tree: Membership.tree)

        let prepared = try await engine.prepare(
            F.checked([F.put(1, "/rooms/r1/title", #""Dinner""#)]), now: fixture.clock.now, admitting: waiting)
        _ = try await fixture.writer.commit(prepared) { try await fixture.store.commit($0) }

        // Carol, never a member, is told of her revocation and nothing else, in the batch of
        // the record; Alice gets the record's event.
        #expect(
            try await F.outbox(fixture.store) == [
                #"-|\#(carol)|{"t":"revoke","r":"permission_denied","app":"toto","sp":"/rooms/r1"}"#,
                #"1|\#(alice)|{"s":"OK","t":"value","app":"toto","sp":"/rooms/r1","d":"{\"title\":\"Dinner\"}"}"#,
            ])
        #expect(try await fixture.store.subscriptions(handles: [alice, carol]).keys.sorted() == [alice])
        #expect(F.indexed(fixture.registry, [alice, carol]) == [alice])
        #expect(fixture.registry.isAdmitted(alice))
        #expect(!fixture.registry.isAdmitted(carol))
        #expect(fixture.registry.accessEntry(alice)?.reads.map(\.string) == ["/members/r1/alice"])
        #expect(fixture.registry.takeAdmissions().isEmpty)
    }

    /// (what revokes the subscription at /a of u2 in record 1, the maximum weight)
    static let revokers: [(String, String, Int)] = [
        ("a revoke record", #"{"seq":1,"app":"toto","op":"revoke","uid":"u2","reason":"disabled"}"#, 1 << 20),
        ("a write that makes its value too big", F.put(1, "/a/big", #""\#(String(repeating: "x", count: 200))""#), 100),
    ]

    @Test("a subscription revoked by a record is told of it and of nothing after, in the same batch", arguments: revokers)
    func revokedWithinBatch(_ revoker: (String, String, Int)) async throws {
        let fixture = try await F()
        let kept = try F.handle(try await fixture.subscribe("/a/x", uid: "u1", mode: .value))
        let revoked = try F.handle(try await fixture.subscribe("/a", uid: "u2", mode: .value))
        var engine = try fixture.engine(settings: ["toto": PipelineSettings(maxWeight: revoker.2)])

        let prepared = try await engine.prepare(F.checked([revoker.1, F.put(2, "/a/x", "1")]), now: fixture.clock.now)
        _ = try await fixture.writer.commit(prepared) { try await fixture.store.commit($0) }

        let outbox = try await F.outbox(fixture.store)
        #expect(outbox.filter { $0.hasPrefix("1|\(revoked)|") && $0.contains(#""t":"revoke""#) }.count == 1, "\(outbox)")
        #expect(outbox.filter { $0.hasPrefix("2|") }.map { $0.split(separator: "|")[1] } == ["\(kept)"], "\(outbox)")
        #expect(!outbox.contains { $0.contains("|\(revoked)|") && !$0.contains(#""t":"revoke""#) }, "\(outbox)")
        #expect(try await fixture.store.subscriptions(handles: [kept, revoked]).keys.sorted() == [kept])
        #expect(F.indexed(fixture.registry, [kept, revoked]) == [kept])
    }

    @Test("a batch that fails to commit leaves the index as it was; once it commits, what its records did is applied")
    func effectsAppliedAfterCommit() async throws {
        let fixture = try await F(admitting: ["toto"])
        let alice = try F.handle(try await fixture.subscribe("/rooms/r1", uid: "alice", mode: .value))
        let bob = try F.handle(try await fixture.subscribe("/rooms/r1", uid: "bob", mode: .value))
        let carol = try F.handle(try await fixture.subscribe("/rooms/r1", uid: "carol", mode: .value))
        var engine = try fixture.engine(settings: Membership.settings, tree: Membership.tree)
        let all = [alice, bob, carol]

        // The three are evaluated (Carol is no member); record 1 revokes Bob, record 2 tells
        // the others.
        let prepared = try await engine.prepare(
            F.checked([#"{"seq":1,"app":"toto","op":"revoke","uid":"bob","reason":"disabled"}"#, F.put(2, "/rooms/r1/title", #""Dinner""#)]),
            now: fixture.clock.now, admitting: fixture.registry.takeAdmissions())
        #expect(prepared.effects.forgottenHandles == [carol, bob])
        #expect(prepared.effects.admitted.map(\.handle).sorted() == [alice, bob].sorted())
        #expect(F.handles(prepared.batch) == [carol, bob, alice])
        // Staging changed nothing in the index.
        #expect(F.indexed(fixture.registry, all) == all)
        #expect(fixture.registry.admittedCount == 0)

        await #expect(throws: StoreError.leaseLost(app: "toto")) {
            _ = try await fixture.writer.commit(prepared) { _ in throw StoreError.leaseLost(app: "toto") }
        }
        #expect(F.indexed(fixture.registry, all) == all)
        #expect(fixture.registry.admittedCount == 0)
        #expect(try await fixture.store.subscriptions(handles: all).count == 3)

        _ = try await fixture.writer.commit(prepared) { try await fixture.store.commit($0) }
        #expect(F.indexed(fixture.registry, all) == [alice])
        #expect(fixture.registry.isAdmitted(alice))
        #expect(!fixture.registry.isAdmitted(bob))
        #expect(fixture.registry.admittedCount == 1)
        #expect(try await fixture.store.subscriptions(handles: all).keys.sorted() == [alice])
        #expect(
            try await F.outbox(fixture.store) == [
                #"-|\#(carol)|{"t":"revoke","r":"permission_denied","app":"toto","sp":"/rooms/r1"}"#,
                #"1|\#(bob)|{"t":"revoke","r":"disabled","app":"toto","sp":"/rooms/r1"}"#,
                #"2|\#(alice)|{"s":"OK","t":"value","app":"toto","sp":"/rooms/r1","d":"{\"title\":\"Dinner\"}"}"#,
            ])
    }

    @Test("a batch staged while the one before it commits does not notify what that one revoked")
    func stagedWhileCommitting() async throws {
        let fixture = try await F()
        let kept = try F.handle(try await fixture.subscribe("/a", uid: "u1"))
        let revoked = try F.handle(try await fixture.subscribe("/a", uid: "u2"))
        var engine = try fixture.engine()

        let first = try await engine.prepare(F.checked([#"{"seq":1,"app":"toto","op":"revoke","uid":"u2","reason":"disabled"}"#]), now: 0)
        var unaware = engine
        let second = try await engine.prepare(F.checked([F.put(2, "/a/x", "1")]), now: 0, committing: first.effects)
        // The same batch staged as if nothing were committing would tell u2.
        let contrast = try await unaware.prepare(F.checked([F.put(2, "/a/x", "1")]), now: 0)
        #expect(F.handles(second.batch) == [kept])
        #expect(F.handles(contrast.batch).sorted() == [kept, revoked].sorted())
        #expect(second.effects.isEmpty)

        _ = try await fixture.writer.commit(first) { try await fixture.store.commit($0) }
        _ = try await fixture.writer.commit(second) { try await fixture.store.commit($0) }
        #expect(try await F.outbox(fixture.store).map { $0.split(separator: "|").prefix(2).joined(separator: "|") } == ["1|\(revoked)", "2|\(kept)"])
        #expect(F.indexed(fixture.registry, [kept, revoked]) == [kept])
    }
}
