import PushCore
import PushContracts
import PushStore
@testable import PushEngine
import Testing

/// The single instance's ingestion, driven through `consume` on a finished queue: every line
/// sent is taken, checked, processed and committed before it returns.
@Suite("The single instance's ingestion")
struct IngestorTests {
    typealias F = EngineFixture

    func ingestor(_ fixture: EngineFixture, watermarks: [String: Int64] = [:], settings: [String: PipelineSettings] = [:]) throws -> Ingestor {
        Ingestor(
            queue: IngestQueue(), store: fixture.store, checker: LineChecker(watermarks: watermarks), engine: try fixture.engine(settings: settings),
            writer: fixture.writer, clock: fixture.clock, logger: F.logger)
    }

    /// Sends `lines`, finishes the queue, and consumes it to its end.
    func ingest(_ lines: [IngestLine], through ingestor: Ingestor) async throws {
        for line in lines { await ingestor.queue.send(line) }
        ingestor.queue.finish()
        let (_, snapshots) = AsyncStream<SnapshotRequest>.makeStream()
        try await ingestor.consume(snapshots: snapshots)
    }

    @Test("several lines are one commit: their notifications, journal and checkpoint together, in record order, answered after")
    func batching() async throws {
        let fixture = try await F()
        let handle = try F.handle(try await fixture.subscribe("/a"))
        let texts = [F.put(1, "/a/x", "1"), F.put(2, "/a/y", "2"), F.put(3, "/a/x", "3")]
        let acks = texts.map { _ in IngestAck() }
        try await ingest(texts.indices.map { F.line(texts[$0], position: Int64($0), ack: acks[$0]) }, through: try ingestor(fixture))

        #expect(
            try await F.outbox(fixture.store) == [
                #"1|\#(handle)|{"s":"OK","t":"childEvent","app":"toto","sp":"/a","added":"{\"x\":1}","removed":"[]","changed":"{}"}"#,
                #"2|\#(handle)|{"s":"OK","t":"childEvent","app":"toto","sp":"/a","added":"{\"y\":2}","removed":"[]","changed":"{}"}"#,
                #"3|\#(handle)|{"s":"OK","t":"childEvent","app":"toto","sp":"/a","added":"{}","removed":"[]","changed":"{\"x\":3}"}"#,
            ])
        // One journal row: the three lines were committed together.
        let journal = try await fixture.store.tree(app: "toto").journal
        #expect(journal.count == 1)
        #expect(journal.first.map { String(decoding: $0.lines, as: UTF8.self) } == texts.joined(separator: "\n") + "\n")
        let checkpoints = try await fixture.store.checkpoints()
        #expect(checkpoints.map(\.source) == ["socket"])
        #expect(checkpoints.first?.lastSeq == 3)
        #expect(checkpoints.first?.position == Int64(2 + texts[2].utf8.count + 1))
        var answers: [AckResult] = []
        for ack in acks { answers.append(await ack.result()) }
        #expect(answers == [.accepted(seq: 1), .accepted(seq: 2), .accepted(seq: 3)])
        #expect(fixture.counters.ingested == ["socket": 3])
        #expect(fixture.outbox.count == 1)
        #expect(fixture.letters.reasons.isEmpty)
    }

    @Test("a socket line at or below the watermark is answered duplicate, a queue-file one refused; refused lines are dead-lettered and answered with why; the rest commits")
    func refusals() async throws {
        let fixture = try await F()
        let handle = try F.handle(try await fixture.subscribe("/a"))
        let texts = [F.put(5, "/a/x", "1"), F.put(4, "/a/x", "2"), "not json", F.put(6, "/a/x", "3"), F.put(6, "/a/y", "4")]
        let repeated = F.put(5, "/a/z", "5")
        let acks = texts.map { _ in IngestAck() }
        try await ingest(
            texts.indices.map { F.line(texts[$0], position: Int64($0), ack: acks[$0]) } + [F.line(repeated, source: "queue-file", position: 40)],
            through: try ingestor(fixture, watermarks: ["socket": 5, "queue-file": 5]))

        #expect(
            try await F.outbox(fixture.store) == [
                #"6|\#(handle)|{"s":"OK","t":"childEvent","app":"toto","sp":"/a","added":"{\"x\":3}","removed":"[]","changed":"{}"}"#
            ])
        let letters = fixture.letters.letters.withLock { $0 }
        #expect(letters.map(\.position) == [2, 40])
        #expect(letters.map { String(decoding: $0.line, as: UTF8.self) } == [texts[2], repeated])
        #expect(letters[1].reason == "seq 5 repeats the last accepted seq 5 of this source; seq must increase")
        var answers: [AckResult] = []
        for ack in acks { answers.append(await ack.result()) }
        #expect(
            answers == [
                .duplicate(seq: 5, watermark: 5), .duplicate(seq: 4, watermark: 5), .rejected(seq: nil, reason: letters[0].reason), .accepted(seq: 6),
                .duplicate(seq: 6, watermark: 6),
            ])
        let checkpoints = try await fixture.store.checkpoints()
        #expect(checkpoints.first { $0.source == "socket" }?.lastSeq == 6)
        #expect(checkpoints.first { $0.source == "queue-file" }?.lastSeq == 5)
        #expect(fixture.counters.ingested == ["socket": 1])
        #expect(fixture.counters.duplicates == ["socket": 3])
        #expect(fixture.counters.rejected == ["not_json": 1, "invalid_seq": 1])
    }
}
