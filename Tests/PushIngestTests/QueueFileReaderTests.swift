import Foundation
import PushCore
@testable import PushIngest
import Testing

/// The queue file as a database writes it: appended, rotated, truncated; real files in a
/// temporary folder.
@Suite("Tailing the queue file")
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
