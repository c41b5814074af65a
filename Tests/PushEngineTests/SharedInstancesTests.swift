import Logging
import PushCore
import PushContracts
import PushEngine
import PushStore
import PushTestSupport
import Testing

/// What several instances on one PostgreSQL database must agree on: one name per live
/// instance, one acceptance per `seq` of the database's stream.
@Suite("Several instances: names and shared sources", .processLevel, .enabled(if: PostgresTestServer.enabled))
struct SharedInstancesTests {
    static let logger = Logger(label: "test")

    func two() async throws -> (PostgresStore, PostgresStore) {
        let url = try PostgresTestServer.shared.get().createDatabase()
        return (try await PostgresStore.open(url: url, logger: Self.logger), try await PostgresStore.open(url: url, logger: Self.logger))
    }

    func record(_ seq: Int64) -> InboxRecord {
        InboxRecord(app: "toto", source: "socket", position: seq, line: Array("{\"seq\":\(seq)}".utf8), seq: seq)
    }

    @Test("a seq accepted through one instance is not stored again through another; a watermark never goes back")
    func sharedSourceDeduplicates() async throws {
        let (a, b) = try await two()
        defer { a.close(); b.close() }
        let first = try await a.enqueue([record(1), record(2), record(3)], checkpoints: [SourceCheckpoint(source: "socket", lastSeq: 3)])
        #expect(first.duplicates.isEmpty)
        #expect(first.watermarks == ["socket": 3])
        // The client lost A before its acks of 2 and 3 arrived: it sends 2, 3 and 4 to B, whose
        // checker knew nothing of them.
        let second = try await b.enqueue([record(2), record(3), record(4)], checkpoints: [SourceCheckpoint(source: "socket", lastSeq: 4)])
        #expect(second.duplicates.map(\.index) == [0, 1])
        #expect(second.duplicates.map(\.watermark) == [3, 3])
        #expect(second.watermarks == ["socket": 4])
        #expect(try await a.inbox(app: "toto", limit: 10).map(\.position) == [1, 2, 3, 4])
        // A checker behind the store never moves the watermark back.
        _ = try await a.enqueue([], checkpoints: [SourceCheckpoint(source: "socket", lastSeq: 2)])
        #expect(try await a.checkpoints().first { $0.source == "socket" }?.lastSeq == 4)
    }

    @Test("two instances enqueueing the same seqs at once: each seq is stored once")
    func concurrentResends() async throws {
        let (a, b) = try await two()
        defer { a.close(); b.close() }
        for round in 0..<20 {
            let seqs = (Int64(round) * 10 + 1)...(Int64(round) * 10 + 10)
            async let left = a.enqueue(seqs.map(record), checkpoints: [SourceCheckpoint(source: "socket", lastSeq: seqs.upperBound)])
            async let right = b.enqueue(seqs.map(record), checkpoints: [SourceCheckpoint(source: "socket", lastSeq: seqs.upperBound)])
            let (l, r) = try await (left, right)
            #expect(l.duplicates.count + r.duplicates.count == 10)
        }
        let positions = try await a.inbox(app: "toto", limit: 1_000).map(\.position)
        #expect(positions == Array(1...200))
    }

    @Test("a name is refused while a live instance heartbeats under it; a dead or retired one's is taken")
    func liveNameRefused() async throws {
        let (a, b) = try await two()
        defer { a.close(); b.close() }
        try await a.registerStart(instance: "node-1", address: "a:1")
        let beating = Task {
            while !Task.isCancelled {
                _ = try? await a.heartbeat(instance: "node-1", address: "a:1")
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        await #expect(throws: SharedInstances.NameInUse.self) {
            try await SharedInstances.claimName("node-1", store: b, watch: .milliseconds(500))
        }
        beating.cancel()
        _ = await beating.value
        // Silent since: watched, and taken (a SIGKILLed instance restarting under its name).
        try await SharedInstances.claimName("node-1", store: b, watch: .milliseconds(500))
        // Gone (a graceful stop removes it), or never seen.
        try await a.forget(instance: "node-1")
        try await SharedInstances.claimName("node-1", store: b)
    }
}
