import Foundation
import Logging
import PushCore
import PushContracts
import PushJSON
@testable import PushIngest
import Synchronization
import PushFakes
import PushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif


/// Runs blocking work on a thread of its own.

@Suite("The Unix-socket source", .serialized, .processLevel)
struct UnixSocketSourceTests {
    /// Runs a socket source on a fresh path while `body` runs.
    func withSource(capacity: Int = 1 << 20, _ body: (String, IngestQueue) async throws -> Void) async throws {
        let path = "/tmp/pd-\(UInt32.random(in: 0...UInt32.max)).sock"
        let queue = IngestQueue(capacityBytes: capacity)
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let source = UnixSocketSource(path: path, queue: queue, logger: logger)
        let task = Task { try await source.run() }
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: path) { try await Task.sleep(for: .milliseconds(10)) }
        do {
            try await body(path, queue)
        } catch {
            task.cancel()
            _ = await task.result
            throw error
        }
        task.cancel()
        queue.finish()
        _ = await task.result
        try? FileManager.default.removeItem(atPath: path)
    }

    @Test("each line is answered, in order, only once the pipeline completes it")
    func answersAfterCompletion() async throws {
        try await withSource { path, queue in
            let client = try SocketClient(path: path)
            client.send("{\"seq\":1}\nnot json\n{\"seq\":3}\n")
            var lines: [IngestLine] = []
            while lines.count < 3 { lines += await queue.receive(limit: 10) }
            #expect(lines.map { String(decoding: $0.bytes, as: UTF8.self) } == ["{\"seq\":1}", "not json", "{\"seq\":3}"])
            #expect(lines.map(\.position) == [1, 2, 3] && lines.allSatisfy { $0.source == "socket" && $0.ack != nil })
            #expect(try await onThread { client.answers(1, timeout: 0.3) }.isEmpty)  // nothing before completion
            lines[2].ack!.complete(.accepted(seq: 3))  // the third completes first; answers keep line order
            #expect(try await onThread { client.answers(1, timeout: 0.3) }.isEmpty)
            lines[0].ack!.complete(.accepted(seq: 1))
            lines[1].ack!.complete(.rejected(seq: nil, reason: "invalid JSON"))
            #expect(try await onThread { client.answers(3, timeout: 30) } == [
                #"{"seq":1,"ok":true}"#, #"{"seq":null,"ok":false,"error":"invalid JSON"}"#, #"{"seq":3,"ok":true}"#,
            ])
        }
    }

    @Test("several clients at once each get their own answers, in their own order")
    func severalClients() async throws {
        try await withSource { path, queue in
            let consumer = Task {
                var done = 0
                while done < 8 * 300 {
                    for line in await queue.receive(limit: 100) {
                        let seq = Int64(String(decoding: line.bytes, as: UTF8.self).split(separator: ":").last!.dropLast()) ?? -1
                        line.ack?.complete(.accepted(seq: seq))
                        done += 1
                    }
                }
            }
            // Clients block in system calls: each on a thread of its own, not on the few threads
            // that run tasks (the consumer needs one).
            let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                for client in 0..<8 {
                    group.addTask {
                        try await onThread {
                            let connection = try SocketClient(path: path)
                            let seqs = (0..<300).map { client * 1000 + $0 }
                            connection.send(seqs.map { "{\"seq\":\($0)}\n" }.joined())
                            let answers = connection.answers(300, timeout: 30)
                            return answers == seqs.map { "{\"seq\":\($0),\"ok\":true}" }
                        }
                    }
                }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            _ = await consumer.result
            #expect(results == Array(repeating: true, count: 8))
        }
    }

    @Test("a client sending faster than the pipeline takes is not read further: memory stays bounded")
    func backPressure() async throws {
        let capacity = 64 << 10
        try await withSource(capacity: capacity) { path, queue in
            let client = try SocketClient(path: path)
            let line = Array(("{\"seq\":1,\"pad\":\"" + String(repeating: "p", count: 1000) + "\"}\n").utf8)
            var stream: [UInt8] = []
            for _ in 0..<20_000 { stream += line }  // 20 MB
            var sent = 0
            let start = Date()
            // Nobody takes from the queue: the source must stop reading, and the socket fill up.
            while sent < stream.count && Date().timeIntervalSince(start) < 3 {
                let count = client.trySend(stream[sent..<min(stream.count, sent + 65_536)])
                if count > 0 { sent += count } else { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(sent < stream.count / 2, "the source read \(sent) bytes without anyone consuming")
            #expect(queue.queuedBytes <= capacity + line.count)
            // Draining lets the rest through, answers included.
            var received = 0
            let drain = Task {
                while received < 20_000 {
                    let lines = await queue.receive(limit: 500)
                    if lines.isEmpty { return }
                    for line in lines { line.ack?.complete(.accepted(seq: 1)) }
                    received += lines.count
                }
            }
            while sent < stream.count && Date().timeIntervalSince(start) < 60 {
                let count = client.trySend(stream[sent..<min(stream.count, sent + 65_536)])
                if count > 0 {
                    sent += count
                } else {
                    _ = try await onThread { client.answers(1_000_000, timeout: 0.01) }  // read answers so that the source can write
                }
            }
            #expect(sent == stream.count)
            _ = try await onThread { client.answers(1_000_000, timeout: 2) }
            drain.cancel()
        }
    }

    @Test("a line over the limit is passed on as such, and the connection goes on")
    func longLine() async throws {
        let path = "/tmp/pd-\(UInt32.random(in: 0...UInt32.max)).sock"
        let queue = IngestQueue()
        let source = UnixSocketSource(path: path, queue: queue, maxLineBytes: 100, logger: Logger(label: "test"))
        let task = Task { try await source.run() }
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: path) { try await Task.sleep(for: .milliseconds(10)) }
        let client = try SocketClient(path: path)
        client.send(String(repeating: "x", count: 5000) + "\n{\"seq\":2}\n")
        var lines: [IngestLine] = []
        while lines.count < 2 { lines += await queue.receive(limit: 10) }
        #expect(lines[0].overflow == 5000 && lines[0].bytes.count <= 5000)
        #expect(String(decoding: lines[1].bytes, as: UTF8.self) == "{\"seq\":2}" && lines[1].overflow == nil)
        task.cancel()
        queue.finish()
        _ = await task.result
    }
}
