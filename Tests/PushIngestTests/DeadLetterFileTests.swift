import Foundation
import Logging
import PushCore
import PushContracts
import PushJSON
import PushTestSupport
@testable import PushIngest
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Keeps the messages logged, to check the warnings.
final class LoggedMessages: Sendable {
    let messages = Mutex<[(level: Logger.Level, message: String, metadata: Logger.Metadata)]>([])

    var logger: Logger {
        Logger(label: "test") { _ in Handler(recorder: self) }
    }

    func warnings() -> [(message: String, metadata: Logger.Metadata)] {
        messages.withLock { $0.filter { $0.level == .warning }.map { ($0.message, $0.metadata) } }
    }

    struct Handler: LogHandler {
        let recorder: LoggedMessages
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            recorder.messages.withLock { $0.append((event.level, "\(event.message)", metadata.merging(event.metadata ?? [:]) { $1 })) }
        }
    }
}

/// The dead-letter file: every line in it whole (a partial line from a failed write or a crash
/// is cut), and its size bounded by rotation; real files in a temporary folder.
@Suite("The dead-letter file")
struct DeadLetterFileTests {
    let folder: String
    var path: String { folder + "/dead-letter.ndjson" }

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("dead-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    /// `count` letters, `number` upward, each line `size` bytes of text.
    static func letters(_ count: Int, from number: Int, size: Int = 100) -> [DeadLetter] {
        (number..<number + count).map { index in
            let line = "line \(index) " + String(repeating: "x", count: max(0, size - 6 - String(index).count))
            return DeadLetter(timestamp: 1_700_000_000_000, source: "queue-file", position: Int64(index), reason: "not_json", line: Array(line.utf8))
        }
    }

    static func bytes(_ path: String) -> [UInt8] {
        FileManager.default.contents(atPath: path).map { Array($0) } ?? []
    }

    /// The file's lines, each checked to be a whole JSON object; the file ends with a newline.
    static func lines(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
        let bytes = bytes(path)
        if let last = bytes.last { #expect(last == UInt8(ascii: "\n"), "\(path) does not end with a newline", sourceLocation: sourceLocation) }
        return bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast().map { line in
            do {
                let json = try JSONParser.parse(Array(line))
                #expect(json["line"]?.stringValue != nil, "a line without its field \"line\": \(String(decoding: line, as: UTF8.self))", sourceLocation: sourceLocation)
                return json["line"]?.stringValue ?? ""
            } catch {
                Issue.record("not a JSON line in \(path): \(String(decoding: line.prefix(200), as: UTF8.self)) (\(error))", sourceLocation: sourceLocation)
                return ""
            }
        }
    }

    static func texts(_ letters: [DeadLetter]) -> [String] {
        letters.map { String(decoding: $0.line, as: UTF8.self) }
    }

    @Test("past the bound the file rotates: it stays within the bound, the rotated file holds its lines, every line whole, none lost in a rotation")
    func rotation() throws {
        let logged = LoggedMessages()
        let bound = 2_000
        let file = DeadLetterFile(path: path, maxSize: bound, logger: logged.logger)
        let rotated = path + ".1"
        #expect(file.rotatedPath == rotated)
        // Batches of 1 to 4 lines of about 190 bytes in the file, then one batch larger than
        // the bound by itself, then small ones again.
        var batches = (0..<30).map { round in Self.letters(1 + round % 4, from: round * 10) }
        batches.insert(Self.letters(15, from: 1_000), at: 20)
        var rotations = 0
        for batch in batches {
            let before = Self.lines(path)
            let beforeSize = Self.bytes(path).count
            let rotatedBefore = Self.lines(rotated)
            let batchSize = batch.reduce(0) { $0 + $1.json.count }
            try file.append(batch)
            let after = Self.lines(path)
            let size = Self.bytes(path).count
            if beforeSize > 0 && beforeSize + batchSize > bound {
                rotations += 1
                #expect(Self.lines(rotated) == before, "the rotated file holds the lines the file held")
                #expect(after == Self.texts(batch), "the new file holds the batch alone")
            } else {
                #expect(after == before + Self.texts(batch))
                #expect(Self.lines(rotated) == rotatedBefore)
            }
            #expect(size <= bound || (batchSize > bound && after == Self.texts(batch)), "\(size) bytes over the bound \(bound)")
        }
        #expect(rotations >= 5)
        #expect(Self.bytes(path).count <= bound)
        let warnings = logged.warnings().filter { $0.message.contains("rotated") }
        #expect(warnings.count == rotations)
        #expect(warnings.first?.metadata["rotatedTo"] == "\(rotated)")
        #expect(warnings.first?.metadata["file"] == "\(path)")
        #expect(warnings.first?.metadata["replacedBytes"] == "0")
        #expect(warnings.dropFirst().allSatisfy { $0.message.contains("older rotated file was replaced") && $0.metadata["replacedBytes"] != "0" })
    }

    @Test("a batch larger than the bound goes whole into a new file, also when the file is empty")
    func oversizedBatch() throws {
        let file = DeadLetterFile(path: path, maxSize: 500, logger: LoggedMessages().logger)
        let big = Self.letters(10, from: 0)
        try file.append(big)
        #expect(Self.lines(path) == Self.texts(big))
        #expect(!FileManager.default.fileExists(atPath: file.rotatedPath))
        let next = Self.letters(1, from: 100)
        try file.append(next)
        #expect(Self.lines(file.rotatedPath) == Self.texts(big))
        #expect(Self.lines(path) == Self.texts(next))
    }

    @Test("a file ending with a partial line is cut back to its last whole line when opened; the new lines are whole")
    func tornTail() throws {
        let whole = Self.letters(2, from: 0).flatMap(\.json)
        let partial = Array(Self.letters(1, from: 2)[0].json.prefix(40))
        #expect(FileManager.default.createFile(atPath: path, contents: Data(whole + partial)))
        let logged = LoggedMessages()
        let file = DeadLetterFile(path: path, logger: logged.logger)
        try file.append(Self.letters(2, from: 3))
        #expect(Self.lines(path) == Self.texts(Self.letters(2, from: 0) + Self.letters(2, from: 3)))
        #expect(Array(Self.bytes(path).prefix(whole.count)) == whole, "the whole lines are kept as they were")
        let warning = logged.warnings().first { $0.message.contains("partial line") }
        #expect(warning?.metadata["bytesCut"] == "40")
        #expect(warning?.metadata["file"] == "\(path)")
    }

    @Test("a file that is one partial line is emptied; a file ending with a newline is kept whole")
    func tornTailAlone() throws {
        #expect(FileManager.default.createFile(atPath: path, contents: Data("{\"ts\":1,\"li".utf8)))
        try DeadLetterFile(path: path, logger: LoggedMessages().logger).append(Self.letters(1, from: 0))
        #expect(Self.lines(path) == Self.texts(Self.letters(1, from: 0)))

        let logged = LoggedMessages()
        let before = Self.bytes(path)
        try DeadLetterFile(path: path, logger: logged.logger).append(Self.letters(1, from: 1))
        #expect(Array(Self.bytes(path).prefix(before.count)) == before)
        #expect(Self.lines(path) == Self.texts(Self.letters(2, from: 0)))
        #expect(logged.warnings().isEmpty)
    }

    @Test("the new file is the owner's alone (0600: it holds applications' data), and a rotated one too")
    func modes() throws {
        let file = DeadLetterFile(path: path, maxSize: 300, logger: LoggedMessages().logger)
        try file.append(Self.letters(1, from: 0))
        try file.append(Self.letters(1, from: 1))
        for name in [path, file.rotatedPath] {
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: name)[.posixPermissions] as? Int)
            #expect(mode == 0o600, "\(name) has mode \(String(mode, radix: 8))")
        }
    }

    @Test("eight tasks appending to one file at once (a shared instance's intake and owner): every line whole, none lost, rotation included")
    func concurrentAppends() async throws {
        // A bound that rotates now and then: a rotation racing a write lost or tore lines.
        let file = DeadLetterFile(path: path, maxSize: 64 << 10, logger: LoggedMessages().logger)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for batch in 0..<40 { try? file.append(Self.letters(3, from: (task * 40 + batch) * 3, size: 150)) }
                }
            }
        }
        // The newest lines are in the file and the rotated one, each whole; counted by number,
        // the two files hold a suffix of what each task wrote (a rotation replaces an older file).
        let lines = Self.lines(file.rotatedPath) + Self.lines(path)
        #expect(Set(lines).count == lines.count, "no line written twice")
        #expect(lines.allSatisfy { $0.hasPrefix("line ") && $0.utf8.count == 150 }, "every line whole")
        let unbounded = DeadLetterFile(path: path + ".all", logger: LoggedMessages().logger)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for batch in 0..<40 { try? unbounded.append(Self.letters(3, from: (task * 40 + batch) * 3, size: 150)) }
                }
            }
        }
        #expect(Set(Self.lines(path + ".all")) == Set(Self.texts(Self.letters(960, from: 0, size: 150))), "all 960 lines, none lost")
    }

    @Test("a file an earlier version created 0640 is made 0600 when opened, its lines kept")
    func earlierModeTightened() throws {
        // Written as an earlier version did (its umask gave 0640), then opened by this one.
        try DeadLetterFile(path: path, logger: LoggedMessages().logger).append(Self.letters(1, from: 0))
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: path)
        try DeadLetterFile(path: path, logger: LoggedMessages().logger).append(Self.letters(1, from: 1))
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode == 0o600, "mode \(String(mode, radix: 8))")
        #expect(Self.lines(path) == Self.texts(Self.letters(2, from: 0)))
    }

    /// A full disk, for real: a tmpfs of 64 KiB mounted for the test. Needs root (CAP_SYS_ADMIN):
    /// skipped with its reason for anyone else, unless CI requires it
    /// (``TestEnvironment/mountsFilesystems``).
    @Test(
        "a write that fails on a full disk leaves the file as it was; once there is room the batch is written whole",
        .enabled(if: TestEnvironment.mountsFilesystems, TestEnvironment.mountsFilesystemsReason))
    func diskFull() throws {
        let disk = folder + "/disk"
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        guard mount("tmpfs", disk, "tmpfs", 0, "size=64k") == 0 else {
            let reason = String(cString: strerror(errno))
            Issue.record(
                "cannot mount a 64 KiB tmpfs on \(disk) (\(reason)): this test needs root (CAP_SYS_ADMIN) to fill a disk; set TEST_PUSHDISPATCH_NO_MOUNT=1 to skip it")
            return
        }
        defer {
            // A file still open keeps it busy: then it goes once closed.
            if umount2(disk, 0) != 0 && umount2(disk, Int32(MNT_DETACH)) != 0 {
                Issue.record("cannot unmount the tmpfs on \(disk): \(String(cString: strerror(errno)))")
            }
        }
        let path = disk + "/dead-letter.ndjson"
        let file = DeadLetterFile(path: path, logger: LoggedMessages().logger)
        try file.append(Self.letters(3, from: 0))
        // Fill the disk: what is left is the room in the file's last page, less than the batch.
        let filler = disk + "/filler"
        let descriptor = open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        #expect(descriptor >= 0, "cannot create \(filler): \(String(cString: strerror(errno)))")
        let chunk = [UInt8](repeating: 0x2A, count: 1024)
        var full = false
        while !full {
            let written = chunk.withUnsafeBytes { write(descriptor, $0.baseAddress!, $0.count) }
            full = written < chunk.count
        }
        close(descriptor)
        let before = Self.bytes(path)
        let batch = Self.letters(40, from: 10, size: 200)  // about 11 KB, more than a page
        for _ in 0..<2 {  // as `retryingIngestion` does
            #expect(throws: IngestError.self) { try file.append(batch) }
            let after = Self.bytes(path)
            #expect(after.count == before.count, "the file holds the \(before.count) bytes it held before the failed write, not \(after.count)")
            #expect(after == before, "the file holds what it held before the failed write, no partial line")
        }
        #expect(unlink(filler) == 0)
        try file.append(batch)
        #expect(Self.lines(path) == Self.texts(Self.letters(3, from: 0)) + Self.texts(batch))
    }
}
