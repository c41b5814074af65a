import PushCore
import PushContracts
import PushStore
@testable import PushEngine
import Testing

/// The order a batch commits in: refused lines on disk first, then the batch, then the
/// answers and counts; a commit that fails leaves nothing of the batch behind.
@Suite("Committing a batch")
struct BatchWriterTests {
    typealias F = EngineFixture

    @Test("refused lines are on disk before the batch commits; counts and answers come after it")
    func order() async throws {
        let fixture = try await F()
        _ = try await fixture.subscribe("/a")
        var engine = try fixture.engine()
        let acks = [IngestAck(), IngestAck()]
        var checker = LineChecker()
        let lines = [F.line("{", position: 0, ack: acks[0]), F.line(F.put(1, "/a/x", "1"), position: 1, ack: acks[1])]
        let prepared = try await engine.prepare(checker.check(lines, now: fixture.clock.now), now: fixture.clock.now)

        var seen: (letters: Int, counted: [String: Int])?
        _ = try await fixture.writer.commit(prepared) { batch in
            seen = (fixture.letters.reasons.count, fixture.counters.ingested)
            return try await fixture.store.commit(batch)
        }
        #expect(seen?.letters == 1)
        #expect(seen?.counted == [:])
        #expect(fixture.counters.ingested == ["socket": 1])
        #expect(await acks[1].result() == .accepted(seq: 1))
        #expect(await acks[0].result() == .rejected(seq: nil, reason: fixture.letters.reasons[0]))
        #expect(try await F.outbox(fixture.store).count == 1)
    }

    @Test("a commit refused for a lost lease writes nothing of the batch, counts nothing, and passes the loss on at once")
    func leaseLost() async throws {
        let fixture = try await F()
        _ = try await fixture.subscribe("/a")
        var engine = try fixture.engine()
        let prepared = try await engine.prepare(F.checked([F.put(1, "/a/x", "1")]), now: fixture.clock.now)

        var attempts = 0
        await #expect(throws: StoreError.leaseLost(app: "toto")) {
            _ = try await fixture.writer.commit(prepared) { _ in
                attempts += 1
                throw StoreError.leaseLost(app: "toto")
            }
        }
        #expect(attempts == 1)
        #expect(try await F.outbox(fixture.store).isEmpty)
        #expect(try await fixture.store.tree(app: "toto").journal.isEmpty)
        #expect(try await fixture.store.checkpoints().isEmpty)
        #expect(fixture.counters.ingested.isEmpty)
        #expect(fixture.outbox.count == 0)
    }
}
