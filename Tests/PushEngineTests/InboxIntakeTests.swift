import PushCore
import PushContracts
import PushStore
import PushTestSupport
@testable import PushEngine
import Testing

/// The shared inbox's intake on PostgreSQL: lines checked, the accepted stored in order with
/// their sources' checkpoints, answered once stored; a socket `seq` another instance accepted
/// is answered as a duplicate.
@Suite("Several instances: the intake", .processLevel, .enabled(if: PostgresTestServer.enabled))
struct InboxIntakeTests {
    typealias F = EngineFixture

    func intake(_ instance: ClusterInstance, machine: String) -> InboxIntake {
        let writer = BatchWriter(deadLetters: instance.letters, counters: instance.counters, index: instance.registry, outbox: OutboxBell(), logger: F.logger)
        return InboxIntake(
            queue: IngestQueue(), store: instance.store, key: { SharedInstances.sourceKey(source: $0, machine: machine) }, checker: LineChecker(),
            writer: writer, clock: ManualClock(), logger: F.logger)
    }

    @Test("accepted lines are stored in order with their checkpoints, refused ones dead-lettered, each answered; a resend through another instance is answered duplicate")
    func intakes() async throws {
        let url = try ClusterInstance.database()
        let a = try await ClusterInstance("node-a", url: url)
        let b = try await ClusterInstance("node-b", url: url)
        defer { a.store.close(); b.store.close() }
        let acks = (0..<4).map { _ in IngestAck() }
        var checker = LineChecker()
        try await intake(a, machine: "node-a").take(
            [
                F.line(F.put(1, "/a", "1"), position: 0, ack: acks[0]), F.line(F.put(2, "/b", "2"), position: 1, ack: acks[1]),
                F.line("[]", position: 2, ack: acks[2]), F.line(F.put(10, "/c", "3"), source: "queue-file", position: 100),
            ], &checker)
        #expect(try await a.store.inbox(app: "toto", limit: 10).map { "\($0.source) \($0.position)" } == ["socket 0", "socket 1", "node-a/queue-file 100"])
        #expect(try await F.inbox(a.store) == [1, 2, 10])
        let checkpoints = try await a.store.checkpoints()
        #expect(checkpoints.first { $0.source == "socket" }?.lastSeq == 2)
        #expect(checkpoints.first { $0.source == "node-a/queue-file" }?.lastSeq == 10)
        #expect(a.letters.letters.withLock { $0.map(\.position) } == [2])
        #expect(await acks[0].result() == .accepted(seq: 1))
        #expect(await acks[1].result() == .accepted(seq: 2))
        #expect(await acks[2].result() == .rejected(seq: nil, reason: a.letters.reasons[0]))
        #expect(a.counters.ingested == ["socket": 2, "queue-file": 1])

        // The client lost A before its answer for 2: it sends 2 and 3 to B, whose checker knew
        // nothing of them. 2 was accepted before: answered duplicate with the store's watermark.
        let resent = [IngestAck(), IngestAck()]
        var other = LineChecker()
        try await intake(b, machine: "node-b").take(
            [F.line(F.put(2, "/b", "2"), position: 0, ack: resent[0]), F.line(F.put(3, "/d", "4"), position: 1, ack: resent[1])], &other)
        #expect(try await F.inbox(b.store) == [1, 2, 10, 3])
        #expect(await resent[0].result() == .duplicate(seq: 2, watermark: 2))
        #expect(await resent[1].result() == .accepted(seq: 3))
        #expect(b.letters.letters.withLock { $0.isEmpty })
        #expect(other.watermarks["socket"] == 3)
        #expect(b.counters.ingested == ["socket": 1])
        #expect(b.counters.duplicates == ["socket": 1])

        // Once more to B, whose checker now knows 3; and a queue-file line the store had from
        // that machine (its key is the machine's): refused and dead-lettered, as a queue file's.
        let again = IngestAck()
        try await intake(b, machine: "node-b").take([F.line(F.put(3, "/d", "4"), position: 2, ack: again)], &other)
        #expect(await again.result() == .duplicate(seq: 3, watermark: 3))
        var stale = LineChecker()
        try await intake(b, machine: "node-a").take([F.line(F.put(10, "/c", "3"), source: "queue-file", position: 100)], &stale)
        #expect(try await F.inbox(b.store) == [1, 2, 10, 3])
        let reasons = b.letters.letters.withLock { $0.map(\.reason) }
        #expect(reasons.count == 1 && reasons.first?.contains("seq 10 was accepted already from this source (through another instance; last accepted 10)") == true)
        #expect(b.counters.duplicates == ["socket": 2])
    }
}
