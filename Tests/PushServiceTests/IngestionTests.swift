import Foundation
import PushCore
import PushContracts
import PushJSON
import PushIngest
import PushStore
@testable import PushService
import PushFakes
import PushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The running service's ingestion: records from the queue file and the socket, through the
/// pipeline, into the outbox; bad lines into the dead-letter file; restarts.
@Suite("Ingestion in the running service", .serialized, .processLevel)
struct IngestionTests {
    static let subscription = #"{"kind":"mobile","mode":"value","path":"/users/alice","context":"fcm-alice","format":"v1"}"#
    static let childSubscription = #"{"kind":"mobile","mode":"childEvent","path":"/users","context":"fcm-all","format":"v1"}"#

    /// The notifications queued, as (record seq, payload text).
    func queued(_ service: ServiceHarness) async throws -> [(Int64?, String)] {
        let store = try SQLiteStore(path: service.folder.appendingPathComponent("store.db").path)
        return try await store.notifications(limit: 1000).map { ($0.entry.recordSeq, String(decoding: $0.entry.payload, as: UTF8.self)) }
    }

    /// Waits until `condition` holds (checked every 20 ms, at most 60 s: a loaded test machine
    /// is slow, and nothing here depends on timing).
    func eventually(_ condition: () async throws -> Bool) async throws -> Bool {
        for _ in 0..<3000 {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    func deadLetters(_ service: ServiceHarness) -> [JSON] {
        guard let data = FileManager.default.contents(atPath: service.deadLetterFile.path) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
    }

    func subscribe(_ service: ServiceHarness, _ documents: [String]) async throws {
        for document in documents {
            let reply = try await service.send(.POST, "/datasync/v2/toto/subscriptions/u1", body: document, token: try service.token())
            #expect(reply.status == 201)
        }
    }

    @Test("records appended to the queue file reach the outbox; a restart resumes the trees and the file where they stopped")
    func queueFileAndRestart() async throws {
        let service = try ServiceHarness(ingest: true)
        try await service.start()
        try await subscribe(service, [Self.subscription, Self.childSubscription])
        try service.appendToQueueFile([
            #"{"seq":1,"app":"toto","op":"put","path":"/users/alice","data":{"name":"Alice"}}"#,
            #"{"seq":2,"app":"toto","op":"patch","path":"/users","data":{"bob/name":"Bob","alice/age":30}}"#,
        ])
        #expect(try await eventually { try await queued(service).count == 3 })
        await service.stop()

        // The restart reads only what is new, against the trees as they were.
        try service.appendToQueueFile([#"{"seq":3,"app":"toto","op":"put","path":"/users/bob","data":null}"#])
        try await service.start()
        #expect(try await eventually { try await queued(service).count == 4 })
        let rows = try await queued(service)
        // Alice's value notification of seq 1 took the content of seq 2 in its place.
        #expect(rows.map(\.0) == [2, 1, 2, 3])
        #expect(rows.last?.1 == #"{"s":"OK","t":"childEvent","app":"toto","sp":"/users","added":"{}","removed":"[\"bob\"]","changed":"{}"}"#)
        // Alice's value notifications coalesced into the newest (none is delivered yet).
        #expect(rows.filter { $0.1.contains("\"sp\":\"/users/alice\"") }.count == 1)
        await service.shutdown()
    }

    @Test("a queue file truncated and written past the checkpoint while stopped is read from its start, not from mid-line")
    func queueFileRewrittenWhileStopped() async throws {
        let service = try ServiceHarness(ingest: true)
        try await service.start()
        try await subscribe(service, [Self.subscription])
        try service.appendToQueueFile([#"{"seq":1,"app":"toto","op":"put","path":"/users/alice","data":{"name":"Alice"}}"#])
        #expect(try await eventually { try await queued(service).count == 1 })
        await service.stop()
        // Copy-truncate and a new stream longer than the old offset: the old offset falls mid-line.
        let handle = try FileHandle(forWritingTo: service.queueFile)
        try handle.truncate(atOffset: 0)
        try handle.close()
        try service.appendToQueueFile([
            #"{"seq":2,"app":"toto","op":"put","path":"/users/alice","data":{"name":"Alice Liddell","city":"Oxford"}}"#
        ])
        try await service.start()
        #expect(try await eventually { try await queued(service).map(\.0) == [2] })
        #expect(deadLetters(service).isEmpty)
        await service.shutdown()
    }

    @Test("a queue file that cannot be opened keeps /readyz at 503 with the reason, until it can be")
    func unreadableQueueFile() async throws {
        let service = try ServiceHarness(ingest: true)
        // Not a file the service can read (root reads through permissions, so a FIFO it is).
        #expect(mkfifo(service.queueFile.path, 0o600) == 0)
        do {
            try await service.start()
        } catch {
            await service.shutdown()
            throw error
        }
        var reply = try await service.send(.GET, "/readyz", token: nil)
        for _ in 0..<100 where reply.json?["status"] != "sourceFailing" {
            try await Task.sleep(for: .milliseconds(20))
            reply = try await service.send(.GET, "/readyz", token: nil)
        }
        #expect(reply.status == 503)
        #expect(reply.json?["sources"]?["queue-file"]?.stringValue?.hasSuffix("changes.ndjson: it is not a regular file") == true, "\(reply.body)")
        try FileManager.default.removeItem(at: service.queueFile)
        try service.appendToQueueFile([#"{"seq":1,"app":"toto","op":"put","path":"/a","data":1}"#])
        #expect(try await eventually { try await service.send(.GET, "/readyz", token: nil).status == 200 })
        await service.shutdown()
    }

    @Test("ingest.maxRecordBytes: a line longer than configured is dead-lettered as too long, one within it is applied")
    func maxRecordBytes() async throws {
        let service = try ServiceHarness(ingest: true, maxRecordBytes: "64KiB")
        try await service.start()
        try await subscribe(service, [Self.childSubscription])
        func record(_ seq: Int, _ user: String, bytes: Int) -> String {
            let head = #"{"seq":\#(seq),"app":"toto","op":"put","path":"/users/\#(user)","data":""#
            return head + String(repeating: "x", count: bytes - head.utf8.count - 2) + #""}"#
        }
        try service.appendToQueueFile([record(1, "a", bytes: 70_000), record(2, "b", bytes: 60_000), record(3, "c", bytes: 65_536)])
        #expect(try await eventually { try await queued(service).count == 2 })
        let letters = deadLetters(service)
        #expect(letters.count == 1, "\(letters)")
        #expect(letters.first?["reason"]?.stringValue?.contains("at most 65536 bytes") == true, "\(String(describing: letters.first?["reason"]))")
        await service.shutdown()
    }

    @Test("every kind of bad line goes to the dead-letter file with its reason, and the stream goes on")
    func deadLetters() async throws {
        let service = try ServiceHarness(ingest: true)
        try await service.start()
        try await subscribe(service, [Self.childSubscription])
        let bad: [(String, String)] = [
            (#"{"seq":1,"app":"toto",op:put}"#, "invalid JSON"),
            (#"{"seq":1,"app":"toto","op":"put","path":"/x","da"#, "invalid JSON"),
            (#"[1,"toto","put"]"#, "a change record is a JSON object"),
            (#"{"app":"toto","op":"put","path":"/x","data":1}"#, "seq: missing"),
            (#"{"seq":"1","app":"toto","op":"put","path":"/x","data":1}"#, "seq: expected an integer"),
            (#"{"seq":1,"op":"put","path":"/x","data":1}"#, "app: missing"),
            (#"{"seq":1,"app":"toto","path":"/x","data":1}"#, "op: missing"),
            (#"{"seq":1,"app":"toto","op":"delete","path":"/x","data":1}"#, "op: expected"),
            (#"{"seq":1,"app":"toto","op":"put","path":"/x/a.b","data":1}"#, "contains '.'"),
            (#"{"seq":1,"app":"toto","op":"put","path":"/x/a\u0001b","data":1}"#, "control character"),
            (#"{"seq":1,"app":"toto","op":"put","path":"/"# + String(repeating: "k/", count: 1100) + #"","data":1}"#, "at most 2048 bytes"),
            (#"{"seq":1,"app":"toto","op":"put","path":"/x/"# + String(repeating: "é", count: 385) + #"","data":1}"#, "at most 768 bytes"),
            (#"{"seq":1,"app":"toto","op":"put","path":"/x","data":{"ok":1,"deep":{"a$":2}}}"#, "contains '$'"),
            (#"{"seq":1,"app":"toto","op":"put","path":"/x","data":{"":1}}"#, "a key is empty"),
            (#"{"seq":1,"app":"toto","op":"put","path":"/x","data":{"s":"a\ud800b"}}"#, "surrogate"),
            (#"{"seq":1,"app":"toto","op":"put","path":"/x","data":{"\udfff":1}}"#, "surrogate"),
            (#"{"seq":1,"app":"toto","op":"patch","path":"/x","data":5}"#, "patch data must be an object"),
            (#"{"seq":1,"app":"toto","op":"patch","path":"/x","data":{"a/b$c":1}}"#, "patch key"),
            (#"{"seq":1,"app":"toto","op":"put","path":"/x","data":NaN}"#, "invalid JSON"),
            (#"{"seq":1,"app":"toto","op":"revoke","reason":"nope"}"#, "reason: a revoke record gives one of"),
        ]
        var lines: [String] = []
        var seq = 10
        for (line, _) in bad {
            lines.append(line)
            seq += 1
            lines.append(#"{"seq":\#(seq),"app":"toto","op":"put","path":"/users/n\#(seq)","data":1}"#)
        }
        lines.append(#"{"seq":\#(seq),"app":"toto","op":"put","path":"/users/again","data":1}"#)  // repeats the last seq
        lines.append(#"{"seq":5,"app":"toto","op":"put","path":"/users/back","data":1}"#)  // goes back
        try service.appendToQueueFile(lines)
        try service.appendToQueueFile(bytes: Array(#"{"seq":99,"app":"toto","op":"put","path":"/x","data":""#.utf8) + [0xC3, 0x28] + Array("\"}\n".utf8))
        try service.appendToQueueFile([#"{"seq":100,"app":"toto","op":"put","path":"/users/last","data":1}"#])
        #expect(try await eventually { try await queued(service).count == bad.count + 1 })
        let letters = deadLetters(service)
        #expect(letters.count == bad.count + 3)
        for (index, (line, reason)) in bad.enumerated() {
            let letter = letters[index]
            #expect(letter["source"] == "queue-file")
            #expect(letter["line"]?.stringValue == line || line.contains("\\ud800") || line.contains("\\udfff"))
            #expect(letter["reason"]?.stringValue?.contains(reason) == true, "\(line.prefix(60)): \(String(describing: letter["reason"]))")
            #expect(letter["position"]?.integerValue != nil && letter["ts"]?.integerValue != nil)
        }
        #expect(letters[bad.count]["reason"]?.stringValue?.contains("repeats the last accepted seq") == true)
        #expect(letters[bad.count + 1]["reason"]?.stringValue?.contains("goes back from") == true)
        let utf8 = letters[bad.count + 2]
        #expect(utf8["reason"]?.stringValue?.contains("invalid UTF-8") == true && utf8["lineBase64"] != nil)
        // The positions are the lines' byte offsets in the file.
        #expect(letters[0]["position"]?.integerValue == 0)
        #expect(letters[1]["position"]?.integerValue == Int64(bad[0].0.utf8.count + 1 + lines[1].utf8.count + 1))
        await service.shutdown()
    }

    @Test("socket clients get ok only once the record is committed; a resend gets ok with duplicate and the watermark, not dead-lettered; refused lines get ok:false with the reason")
    func socketAnswers() async throws {
        let service = try ServiceHarness(ingest: true)
        try await service.start()
        try await subscribe(service, [Self.subscription])
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: service.socketPath) { try await Task.sleep(for: .milliseconds(10)) }
        // No wait: the API answers once the matching index has the subscription.
        let path = service.socketPath
        let answers = try await onThread { () -> [String] in
            let client = try SocketClient(path: path)
            client.send(
                #"{"seq":7,"app":"toto","op":"put","path":"/users/alice","data":"A"}"# + "\n" + "oops\n"
                    + #"{"seq":6,"app":"toto","op":"put","path":"/users/alice","data":"B"}"# + "\n"
                    + #"{"seq":7,"app":"toto","op":"put","path":"/users/alice","data":"A"}"# + "\n")
            return client.answers(4, timeout: 60)
        }
        #expect(answers.count == 4)
        #expect(answers.first == #"{"seq":7,"ok":true}"#)
        #expect(answers.dropFirst().first?.hasPrefix(#"{"seq":null,"ok":false,"error":"invalid JSON at byte 0"#) == true)
        #expect(Array(answers.suffix(2)) == [#"{"seq":6,"ok":true,"duplicate":true,"watermark":7}"#, #"{"seq":7,"ok":true,"duplicate":true,"watermark":7}"#])
        // Only the line that is not a record is dead-lettered.
        #expect(deadLetters(service).map { $0["line"]?.stringValue } == ["oops"])
        // What was acknowledged is in the store: the notification and the watermark.
        let store = try SQLiteStore(path: service.folder.appendingPathComponent("store.db").path)
        #expect(try await store.notifications(limit: 10).map(\.entry.recordSeq) == [7])
        #expect(try await store.checkpoints().first { $0.source == "socket" }?.lastSeq == 7)
        await service.shutdown()
    }

    @Test("trees are snapshotted and restored from the snapshot and the journal after it")
    func snapshots() async throws {
        let service = try ServiceHarness(ingest: true, batchLines: 1, snapshotAfterBytes: 200)
        try await service.start()
        try await subscribe(service, [Self.childSubscription])
        var lines: [String] = []
        for seq in 1...40 {
            lines.append(#"{"seq":\#(seq),"app":"toto","op":"put","path":"/users/u\#(seq)","data":{"n":\#(seq)}}"#)
        }
        try service.appendToQueueFile(lines)
        #expect(try await eventually { try await queued(service).count == 40 })
        let store = try SQLiteStore(path: service.folder.appendingPathComponent("store.db").path)
        #expect(try await eventually { try await store.tree(app: "toto").snapshot != nil })
        await service.stop()
        let stored = try await store.tree(app: "toto")
        #expect(stored.snapshot != nil && stored.journal.count < 40)
        try await service.start()
        try service.appendToQueueFile([#"{"seq":41,"app":"toto","op":"put","path":"/users/u40","data":{"n":40,"m":1}}"#])
        #expect(try await eventually { try await queued(service).count == 41 })
        #expect(try await queued(service).last?.1 == #"{"s":"OK","t":"childEvent","app":"toto","sp":"/users","added":"{}","removed":"[]","changed":"{\"u40\":{\"m\":1,\"n\":40}}"}"#)
        await service.shutdown()
    }
}

/// Runs blocking work on a thread of its own.


@Suite("Start-up failures")
struct StartupFailureTests {
    @Test("a store whose tree cannot be read stops the start with the store's error, and the HTTP clients are shut down")
    func unreadableTree() async throws {
        let service = try ServiceHarness(ingest: true)
        let store = try SQLiteStore(path: service.folder.appendingPathComponent("store.db").path)
        var batch = CommitBatch(now: 1)
        batch.journal["toto"] = Array("this is not a change record\n".utf8)
        _ = try await store.commit(batch)
        do {
            try await service.start()
            Issue.record("the service started over an unreadable journal")
        } catch let error as StoreError {
            #expect(error.kind == .corrupt)
            #expect(error.description.contains("journal row"))
        }
        // An unshut HTTP client would have trapped when the failed run let it go.
        await service.shutdown()
    }
}
