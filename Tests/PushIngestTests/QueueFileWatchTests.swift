import Foundation
import Logging
import PushContracts
@testable import PushIngest
import PushTestSupport
import Testing

/// The queue file's reader wakes when the file changes, not on a timer (``FileChangeWatch``):
/// with both the poll and the watch's fallback an hour long, only the watch can bring a line in.
@Suite("The queue file is watched, not polled", .serialized, .processLevel)
struct QueueFileWatchTests {
    func append(_ text: String, to path: String) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(text.utf8))
        try handle.close()
    }

    /// Waits (up to 10 s) for `count` lines.
    func lines(_ queue: IngestQueue, _ count: Int) async throws -> [String] {
        let alarm = Task {
            try await Task.sleep(for: .seconds(10))
            queue.wake()
        }
        defer { alarm.cancel() }
        var lines: [String] = []
        while lines.count < count {
            let got = await queue.receive(limit: 100)
            if got.isEmpty { break }  // woken: too late
            lines += got.map { String(decoding: $0.bytes, as: UTF8.self) }
        }
        return lines
    }

    @Test("lines appended, a file that appears, a rotation and a line longer than a read are read at once, with no poll")
    func watched() async throws {
        #if os(Linux)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pd-watch-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("queue.ndjson").path
        let queue = IngestQueue(capacityBytes: 1 << 20)
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let source = QueueFileSource(
            path: path, queue: queue, checkpoint: nil, pollInterval: .seconds(3_600), watchFallback: .seconds(3_600), logger: logger)
        let task = Task { try await source.run() }
        defer { task.cancel() }
        try await Task.sleep(for: .milliseconds(200))
        // The file appears.
        FileManager.default.createFile(atPath: path, contents: Data("{\"seq\":1}\n".utf8))
        #expect(try await lines(queue, 1) == [#"{"seq":1}"#])
        // Appended to.
        try append("{\"seq\":2}\n{\"seq\":3}\n", to: path)
        #expect(try await lines(queue, 2) == [#"{"seq":2}"#, #"{"seq":3}"#])
        // Rotated: moved away, a new file in its place.
        try append("{\"seq\":4}\n", to: path)
        #expect(try await lines(queue, 1) == [#"{"seq":4}"#])
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        FileManager.default.createFile(atPath: path, contents: Data("{\"seq\":5}\n".utf8))
        #expect(try await lines(queue, 1) == [#"{"seq":5}"#])
        try append("{\"seq\":6}\n", to: path)
        #expect(try await lines(queue, 1) == [#"{"seq":6}"#])
        // A line longer than a read's budget (4 MiB), written at once: one change for several
        // reads.
        let long = "{\"seq\":7,\"x\":\"" + String(repeating: "a", count: 9 << 20) + "\"}"
        try append(long + "\n{\"seq\":8}\n", to: path)
        let after = try await lines(queue, 2)
        #expect(after.map(\.utf8.count) == [long.utf8.count, 9])
        task.cancel()
        queue.finish()
        _ = await task.result
        #endif
    }

    /// The watches of an inotify instance (`/proc/self/fdinfo`: one `inotify wd:` line each).
    static func watches(_ descriptor: Int32) -> Int {
        let info = (try? String(contentsOfFile: "/proc/self/fdinfo/\(descriptor)", encoding: .utf8)) ?? ""
        return info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
    }

    #if os(Linux)
    @Test("rotated files that are kept are not watched any more: the folder and the current file, whatever the rotations")
    func rotatedFilesUnwatched() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("watch-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("changes.ndjson").path
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        let watch = try #require(FileChangeWatch(path: path, fallback: .seconds(3_600)))
        defer { watch.stop() }
        #expect(Self.watches(watch.descriptor) == 2)
        // 30 rotations, each old file kept beside the new one.
        for rotation in 1...30 {
            try FileManager.default.moveItem(atPath: path, toPath: path + ".\(rotation)")
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
            try append("{\"seq\":\(rotation)}\n", to: path)
            await watch.next()
        }
        var count = Self.watches(watch.descriptor)
        for _ in 0..<250 where count != 2 {
            try await Task.sleep(for: .milliseconds(20))
            count = Self.watches(watch.descriptor)
        }
        #expect(count == 2, "\(count) watches after 30 rotations")
    }
    #endif
}
