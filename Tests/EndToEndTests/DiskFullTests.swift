import Foundation
import PushCore
import PushJSON
import PushFakes
import PushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The SQLite store on a full disk (issue 22, the machine's faults): a filesystem of the test's
/// own (a 64 MiB tmpfs; the tests run as root, as CI does) holds the database and the
/// dead-letter file, and a filler takes all of it but 1 MiB. Ingestion must stop accepting
/// (socket clients get `ok:false` or wait), corrupt nothing, and go on by itself once the filler
/// is gone, every record applied once. Skipped with its reason unless run as root or required
/// by CI (`TEST_PUSHDISPATCH_REQUIRE_ROOT=1`).
@Suite("The SQLite store on a full disk, as a process", .serialized, .processLevel, .enabled(if: TestEnvironment.mountsFilesystems, TestEnvironment.mountsFilesystemsReason))
struct DiskFullTests {
    static func run(_ command: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = TestProcesses.make(URL(fileURLWithPath: command), arguments)
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try TestProcesses.launch(process)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    static func freeBytes(_ path: String) -> Int {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return -1 }
        return Int(info.f_bavail) * Int(info.f_frsize)
    }

    @Test("ingestion stops while the disk is full, corrupts nothing, and resumes by itself: every record applied once")
    func diskFull() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-full-\(UUID().uuidString)")
        let disk = folder.appendingPathComponent("disk")
        try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
        let mounted = try Self.run("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", disk.path])
        try #require(mounted.status == 0, "cannot mount a tmpfs (needs root with CAP_SYS_ADMIN; unset TEST_PUSHDISPATCH_REQUIRE_ROOT where that is not permitted): \(mounted.output)")
        defer { _ = try? Self.run("/usr/bin/umount", ["-l", disk.path]) }
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {sqlite: ./disk/store.db}
            ingest: {socket: ./in.sock, deadLetter: ./disk/dead.ndjson}
            http: {port: 0}
            delivery: {enabled: false}
            apps: {toto: {auth: {hs256Secret: "\(ServiceEndToEndTests.secret)"}}}
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        let service = try RunningService(config: config)
        let port = try await service.port()
        _ = try ServiceEndToEndTests.subscribe(port, #"{"kind":"mobile","mode":"childEvent","format":"v2","path":"/a","context":"device-1"}"#)

        // The filler: all the disk but 1 MiB.
        let filler = disk.appendingPathComponent("filler")
        _ = FileManager.default.createFile(atPath: filler.path, contents: nil)
        let handle = try FileHandle(forWritingTo: filler)
        let chunk = Data(repeating: 0x5A, count: 256 << 10)
        while Self.freeBytes(disk.path) > (1 << 20) + chunk.count { try handle.write(contentsOf: chunk) }
        try handle.close()

        // Records of ~2 KB, 20 at a time, each batch waiting for its answers: until the disk is
        // full (an ok:false, or no answer for 5 s).
        let socket = try SocketClient(path: folder.appendingPathComponent("in.sock").path)
        func line(_ seq: Int) -> String {
            #"{"seq":\#(seq),"app":"toto","op":"patch","path":"/a","data":{"k\#(seq)":"\#(String(repeating: "x", count: 2000))"}}"#
        }
        var acknowledged = 0  // every seq up to this one answered ok:true
        var refusals: [String] = []
        var full = false
        while !full && acknowledged < 20_000 {
            let batch = (acknowledged + 1)...(acknowledged + 20)
            socket.send(batch.map(line).joined(separator: "\n") + "\n")
            let answers = try await onThread { socket.answers(20, timeout: 5) }
            for (offset, answer) in answers.enumerated() {
                if answer.contains(#""ok":true"#) && acknowledged == batch.lowerBound + offset - 1 { acknowledged += 1 } else { refusals.append(answer) }
            }
            full = answers.count < 20 || !refusals.isEmpty
        }
        #expect(full, "the disk never filled: \(acknowledged) records acknowledged")
        print("disk full after \(acknowledged) records; refusals: \(refusals.prefix(2)); free \(Self.freeBytes(disk.path)) bytes")
        #expect(refusals.allSatisfy { !$0.contains(#""ok":true"#) })
        // While full, nothing more is acknowledged.
        #expect(try await onThread { socket.answers(1, timeout: 1) }.isEmpty)

        // Space returns: the service goes on by itself. The client sends again what was not
        // answered ok (from the first seq not acknowledged): what was committed meanwhile comes
        // back ok with `duplicate`, never applied twice.
        try FileManager.default.removeItem(at: filler)
        // The first connection's owed answers come as the batch commits (or not: it resends).
        _ = try await onThread { socket.answers(1_000, timeout: 3) }
        let resend = (acknowledged + 1)...(acknowledged + 200)
        #expect(service.process.isRunning, "the service stopped on a full disk: \(service.log.withLock { $0 }.suffix(1500))")
        let resent = try SocketClient(path: folder.appendingPathComponent("in.sock").path)
        resent.send(resend.map(line).joined(separator: "\n") + "\n")
        let answers = try await onThread { resent.answers(resend.count, timeout: 60) }
        #expect(answers.count == resend.count, "\(answers.suffix(2))")
        #expect(answers.allSatisfy { $0.contains(#""ok":true"#) }, "\(answers.filter { !$0.contains(#""ok":true"#) }.prefix(3))")
        #expect(await service.stop(within: 60) == 0)

        // Nothing corrupted; every record applied once: the source's watermark is the last seq.
        let integrity = try Self.run("/usr/bin/sqlite3", [disk.appendingPathComponent("store.db").path, "PRAGMA integrity_check"])
        #expect(integrity.output.trimmingCharacters(in: .whitespacesAndNewlines) == "ok", "\(integrity.output)")
        let listed = try Executable.run(["checkpoints", "--config", config])
        #expect(listed.lines.contains { $0.hasPrefix("socket\t\(resend.upperBound)\t") }, "\(listed.stdout)")
        let dead = (try? String(contentsOf: disk.appendingPathComponent("dead.ndjson"), encoding: .utf8)) ?? ""
        for line in dead.split(separator: "\n") {
            #expect((try? JSONParser.parse(Array(line.utf8))) != nil, "a torn dead letter: \(line.prefix(80))")
        }
    }
}
