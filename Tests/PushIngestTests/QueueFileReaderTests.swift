import Foundation
import PushCore
@testable import PushIngest
import Synchronization
import Testing
import PushTestSupport

/// The queue file as a database writes it: appended, rotated, truncated; real files in a
/// temporary folder.
@Suite("Tailing the queue file", .processLevel)
struct QueueFileReaderTests {
    let folder: URL
    var path: String { folder.appendingPathComponent("changes.ndjson").path }

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("queue-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    func append(_ text: String, to file: String? = nil) throws {
        try append(bytes: Array(text.utf8), to: file)
    }

    func append(bytes: [UInt8], to file: String? = nil) throws {
        let target = file ?? path
        if !FileManager.default.fileExists(atPath: target) { #expect(FileManager.default.createFile(atPath: target, contents: nil)) }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: target))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
    }

    func texts(_ lines: [QueueFileReader.Line]) -> [String] {
        lines.map { String(decoding: $0.bytes, as: UTF8.self) }
    }

    @Test("lines appended are read as they come; a partial last line waits for its newline")
    func appends() throws {
        var reader = QueueFileReader(path: path)
        #expect(try reader.read().isEmpty)  // no file yet
        try append("one\ntwo\nthr")
        let first = try reader.read()
        #expect(texts(first) == ["one", "two"])
        #expect(first.map(\.position) == [0, 4] && first.map(\.end) == [4, 8])
        #expect(try reader.read().isEmpty)
        try append("ee\n")
        let second = try reader.read()
        #expect(texts(second) == ["three"] && second[0].position == 8 && second[0].end == 14)
        #expect(reader.checkpoint?.offset == 14)
    }

    @Test("rotation: the old file is finished (lines appended to it after the rename included), then the new one is read")
    func rotation() throws {
        var reader = QueueFileReader(path: path, rotationGrace: 3)
        try append("a1\na2\n")
        #expect(texts(try reader.read()) == ["a1", "a2"])
        let rotated = folder.appendingPathComponent("changes.ndjson.1").path
        try FileManager.default.moveItem(atPath: path, toPath: rotated)
        try append("b1\n")  // the new file
        try append("a3\na4-partial", to: rotated)  // the writer still had the old one open
        #expect(texts(try reader.read()) == ["a3"])
        // Quiet reads of the old file, then it is left: its partial last line is a line.
        var collected: [String] = []
        for _ in 0..<5 { collected += texts(try reader.read()) }
        #expect(collected == ["a4-partial", "b1"])
        let events = reader.takeEvents()
        #expect(events.contains { if case .rotated = $0 { return true } else { return false } })
    }

    @Test("truncation in place: reading starts again at the beginning")
    func truncation() throws {
        var reader = QueueFileReader(path: path)
        try append("x1\nx2\n")
        #expect(texts(try reader.read()) == ["x1", "x2"])
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: 0)
        try handle.close()
        try append("y1\n")
        #expect(texts(try reader.read()) == ["y1"])
        #expect(reader.takeEvents().contains { if case .truncated = $0 { return true } else { return false } })
    }

    /// Truncates the queue file in place and writes `text` into it.
    func rewrite(_ text: String) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(text.utf8))
        try handle.close()
    }

    @Test("truncated and written again past the offset between two reads: read again from its start, never from mid-line")
    func rewrittenWhileFollowed() throws {
        var reader = QueueFileReader(path: path)
        try append("{\"seq\":1}\n{\"seq\":2}\n")
        #expect(texts(try reader.read()).count == 2)
        _ = reader.takeEvents()
        // Longer than before: the size alone cannot tell.
        try rewrite("{\"seq\":10,\"x\":\"abcdef\"}\n{\"seq\":11}\n")
        #expect(texts(try reader.read()) == ["{\"seq\":10,\"x\":\"abcdef\"}", "{\"seq\":11}"])
        #expect(reader.takeEvents().contains { if case .rewritten = $0 { return true } else { return false } })
        // Appends after that are read as usual: no false alarm.
        try append("{\"seq\":12}\n")
        #expect(texts(try reader.read()) == ["{\"seq\":12}"])
        #expect(!reader.takeEvents().contains { if case .rewritten = $0 { return true } else { return false } })
    }

    @Test("resuming a checkpoint whose bytes changed (rewritten while stopped): from the start; unchanged: at the offset")
    func rewrittenWhileStopped() throws {
        try append("a1\na2\n")
        var reader = QueueFileReader(path: path)
        let lines = try reader.read()
        let checkpoint = (lines[1].fileIdentity, lines[1].end)
        var same = QueueFileReader(path: path, checkpoint: checkpoint, fingerprint: lines[1].fingerprint)
        try append("a3\n")
        #expect(texts(try same.read()) == ["a3"])
        try rewrite("b1-longer-than-before\nb2\n")
        var changed = QueueFileReader(path: path, checkpoint: checkpoint, fingerprint: lines[1].fingerprint)
        #expect(texts(try changed.read()) == ["b1-longer-than-before", "b2"])
        #expect(changed.takeEvents().contains(.rewritten(identity: checkpoint.0, at: checkpoint.1)))
        // Shorter than the checkpoint while stopped: said, and read from the start.
        try rewrite("c\n")
        var shorter = QueueFileReader(path: path, checkpoint: (checkpoint.0, 100), fingerprint: "0")
        #expect(texts(try shorter.read()) == ["c"])
        #expect(shorter.takeEvents().contains(.truncated(identity: checkpoint.0, at: 100)))
    }

    @Test("a path that cannot be read is a problem, said once, until it can be")
    func unreadable() throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        var reader = QueueFileReader(path: path)
        #expect(try reader.read().isEmpty)
        #expect(reader.problem == "it is not a regular file")
        #expect(try reader.read().isEmpty)
        #expect(reader.takeEvents() == [.unreadable(reason: "it is not a regular file")])
        try FileManager.default.removeItem(atPath: path)
        try append("ok\n")
        #expect(texts(try reader.read()) == ["ok"])
        #expect(reader.problem == nil)
        #expect(reader.takeEvents().first == .unreadable(reason: nil))
    }

    @Test("resuming from a checkpoint: the same file at its offset; a rotated file finished first; a vanished one skipped")
    func resuming() throws {
        try append("r1\nr2\nr3\n")
        var reader = QueueFileReader(path: path)
        let lines = try reader.read()
        let identity = lines[1].fileIdentity
        // Resume after r2, same file.
        var resumed = QueueFileReader(path: path, checkpoint: (identity, lines[1].end))
        #expect(texts(try resumed.read()) == ["r3"])
        // The file was rotated away and a new one started: the old one is finished first.
        let rotated = folder.appendingPathComponent("changes.ndjson.1").path
        try FileManager.default.moveItem(atPath: path, toPath: rotated)
        try append("n1\n")
        var afterRotation = QueueFileReader(path: path, checkpoint: (identity, lines[1].end))
        var collected: [String] = []
        for _ in 0..<3 { collected += texts(try afterRotation.read()) }
        #expect(collected == ["r3", "n1"])
        // The checkpointed file is gone: the current one is read from its start.
        try FileManager.default.removeItem(atPath: rotated)
        var gone = QueueFileReader(path: path, checkpoint: (identity, lines[1].end))
        #expect(texts(try gone.read()) == ["n1"])
        #expect(gone.takeEvents().contains(.checkpointedFileGone(identity: identity)))
    }

    @Test("a line longer than the limit is reported with its beginning and length, and reading goes on")
    func overflow() throws {
        var reader = QueueFileReader(path: path, maxLineBytes: 16)
        try append("short\n" + String(repeating: "z", count: 40) + "\nafter\n")
        let lines = try reader.read()
        #expect(texts(lines) == ["short", String(repeating: "z", count: 16), "after"])
        #expect(lines[1].overflow == 40 && lines[1].position == 6 && lines[1].end == 47)
        #expect(lines[2].position == 47)
    }

    @Test("a FIFO at the path when it is opened (put there after the reader's look at it) is refused, not waited on")
    func fifoAtOpen() async throws {
        #expect(mkfifo(path, 0o600) == 0)
        let path = self.path
        let ((opened, problem), took) = await FIFOCall.timed(fifo: path) { () -> (Bool, String?) in
            var reader = QueueFileReader(path: path)
            let opened = reader.open(path, expecting: nil, at: 0, fingerprint: nil)
            return (opened, reader.problem)
        }
        let done = took < .seconds(8)
        #expect(done, "the reader waited in open() for a writer")
        #expect(!opened)
        #expect(problem == "it is not a regular file")
    }

    @Test("bytes split anywhere give the same lines")
    func splits() throws {
        let text = "{\"seq\":1}\n{\"seq\":2,\"é\":\"日本\"}\n\n{\"seq\":3}\n"
        let bytes = Array(text.utf8)
        for cut in 1..<bytes.count {
            let file = folder.appendingPathComponent("split-\(cut).ndjson").path
            var reader = QueueFileReader(path: file)
            #expect(FileManager.default.createFile(atPath: file, contents: Data(bytes[..<cut])))
            var lines = texts(try reader.read())
            try append(bytes: Array(bytes[cut...]), to: file)
            lines += texts(try reader.read())
            #expect(lines == ["{\"seq\":1}", "{\"seq\":2,\"é\":\"日本\"}", "", "{\"seq\":3}"], "cut at \(cut)")
        }
    }
}
