import Foundation
import PushContracts
@testable import PushService
import PushTestSupport
import Testing

@Suite("Dead letters read for the operations API")
struct DeadLetterReaderTests {
    static func letter(_ seq: Int, reason: String, source: String = "queue-file") -> String {
        let line = #"{"seq":\#(seq),"app":"toto","op":"put","path":"/a","data":{"secret":"value-\#(seq)"}}"#
        var escaped = line.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        escaped = "\"" + escaped + "\""
        return #"{"ts":\#(1_000 + seq),"source":"\#(source)","position":\#(seq * 10),"reason":"\#(reason)","line":\#(escaped)}"#
    }

    @Test("oldest first across the rotated file and the current one; filtered; paged by cursor; the line never whole; a torn line skipped")
    func pages() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-dead-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("dead.ndjson").path
        try Data(([1, 2].map { Self.letter($0, reason: "op: expected put") }.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path + ".1"))
        try Data(([3, 4, 5].map { Self.letter($0, reason: $0 == 4 ? "path: bad" : "op: expected put") } + ["{not a letter"]).joined(separator: "\n").utf8)
            .write(to: URL(fileURLWithPath: path))
        let reader = DeadLetterReader(path: path)
        var seqs: [Int64?] = []
        var cursor: Int64?
        var pages = 0
        repeat {
            let page = try reader.page(DeadLetterFilter(), cursor: cursor, limit: 2)
            seqs += page.items.map(\.seq)
            #expect(page.items.allSatisfy { $0.head.utf8.count <= DeadLetterEntry.headCharacters && !$0.head.contains("value-") && $0.sha256.utf8.count == 12 })
            cursor = page.nextCursor
            pages += 1
        } while cursor != nil && pages < 10
        #expect(seqs == [1, 2, 3, 4, 5] && pages == 3)
        #expect(try reader.page(DeadLetterFilter(reason: "path"), cursor: nil, limit: 10).items.map(\.seq) == [4])
        #expect(try reader.page(DeadLetterFilter(since: 1_004), cursor: nil, limit: 10).items.map(\.seq) == [4, 5])
        #expect(try reader.page(DeadLetterFilter(app: "other"), cursor: nil, limit: 10).items.isEmpty)
        #expect(try DeadLetterReader(path: path + ".missing").page(DeadLetterFilter(), cursor: nil, limit: 10).items.isEmpty)
    }

    @Test("a too-long line's whole text is read again from the queue file only when it is a regular file, a FIFO refused without waiting")
    func wholeLineFromRegularFileOnly() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-whole-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let queue = folder.appendingPathComponent("changes.ndjson").path
        try Data("{\"seq\":1}\n{\"seq\":2,\"pad\":\"abcdef\"}\n".utf8).write(to: URL(fileURLWithPath: queue))
        let whole = DeadLetterReader.wholeLine(queueFile: queue, position: 10, kept: Array("{\"seq\":2".utf8), limit: 100)
        #expect(whole.map { String(decoding: $0, as: UTF8.self) } == "{\"seq\":2,\"pad\":\"abcdef\"}")
        // A FIFO at the path: nil at once.
        let fifo = folder.appendingPathComponent("fifo.ndjson").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let (read, took) = await FIFOCall.timed(fifo: fifo) { DeadLetterReader.wholeLine(queueFile: fifo, position: 0, kept: [], limit: 100) }
        #expect(read == nil)
        #expect(took < .seconds(8), "waited \(took) in open() for a writer")
    }
}
