import ArgumentParser
import Foundation
import Logging
import PushCore
import PushJSON
import PushMatching
import PushService
import PushStore

/// The path of a reference script in the source tree's `scripts/` (benchmarks run from a
/// checkout); `nil` when it is not there.
func referenceScript(_ name: String) -> String? {
    // Sources/PushBench/ → the repository's scripts/.
    let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/\(name)").path
    return FileManager.default.fileExists(atPath: path) ? path : nil
}

/// Runs a Python reference script beside a measurement; `nil` when it cannot run.
func runReference(_ script: String, _ arguments: [String]) -> [Double]? {
    guard let scriptPath = referenceScript(script) else { return nil }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", scriptPath] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return nil }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { return nil }
    return String(decoding: data, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Double($0) }
}

func temporaryFolder(_ name: String) throws -> String {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-bench-\(name)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder.path
}

struct BenchIngest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Records through parse → tree → match → payload → outbox commit (SQLite, and PostgreSQL with --postgres), with a Python reference on the same records.")

    @Option(help: "Subscriptions in the store (at /users/{uid}/inbox).") var subscriptions = 10_000
    @Option(help: "Records to ingest (puts of ~--value-bytes at random users' inboxes).") var records = 200_000
    @Option(help: "Approximate size of each written value.") var valueBytes = 1_000
    @Flag(help: "v2 payloads signed with HS256 instead of v1.") var v2 = false
    @Flag(
        help: """
            Run twice on the same records, side by side: without rules, then under a membership rule \
            (each inbox readable by the members listed at /members/{uid}; every 100th record rewrites a members list, keeping the user).
            """)
    var membershipRule = false
    @Flag(
        help: "After a warm-up, run eight times on the same records, side by side: the history off, on, on, off, twice, and their means (SPEC §13.2: the skips it notes are written with each batch).")
    var compareHistory = false
    @Flag(help: "Keep the delivery history (its skips) in the single run (profiling one mode).")
    var history = false
    @Option(help: "Also run the same records into this PostgreSQL database (a scratch one: application \"bench\" is written there and removed after): postgres://user@host:port/db.")
    var postgres: String?

    func validate() throws {
        guard subscriptions >= 1 else { throw ValidationError("--subscriptions must be at least 1, got \(subscriptions)") }
        guard records >= 1 else { throw ValidationError("--records must be at least 1, got \(records)") }
        guard valueBytes >= 0 else { throw ValidationError("--value-bytes must be 0 or more, got \(valueBytes)") }
    }

    func run() async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .warning
        let folder = try temporaryFolder("ingest")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let setup = ContinuousClock.now
        let store = try await IngestBenchmark.prepare(folder: folder, subscriptions: subscriptions, v2: v2, members: membershipRule)
        let lines = IngestBenchmark.records(
            count: records, subscriptions: subscriptions, valueBytes: valueBytes, membershipEvery: membershipRule ? 100 : nil)
        try Data(lines.map { $0 + [UInt8(ascii: "\n")] }.joined()).write(to: URL(fileURLWithPath: folder + "/records.ndjson"))
        print("setup: \(subscriptions) subscriptions, \(records) records of ~\(valueBytes) bytes (\(ContinuousClock.now - setup))")
        let result = try await IngestBenchmark.run(store: store, folder: folder, lines: lines, keepsHistory: history, logger: logger)
        report(
            membershipRule ? "pushdispatch, no rules" : compareHistory ? "pushdispatch, warm-up (history off, not compared)" : history ? "pushdispatch, history on" : "pushdispatch",
            result)
        if compareHistory {
            // Off, on, on, off, twice (ABBA): a drift of the machine over the runs weighs on both alike.
            var runs: [Bool: [IngestBenchmark.Result]] = [:]
            for (round, on) in [false, true, true, false, false, true, true, false].enumerated() {
                let again = try await IngestBenchmark.prepare(folder: folder, subscriptions: subscriptions, v2: v2, members: membershipRule, name: "history-\(round)")
                let measured = try await IngestBenchmark.run(store: again, folder: folder, lines: lines, keepsHistory: on, logger: logger)
                report("pushdispatch, history \(on ? "on" : "off")", measured)
                runs[on, default: []].append(measured)
            }
            func mean(_ on: Bool, _ value: (IngestBenchmark.Result) -> Double) -> Double {
                let all = runs[on] ?? []
                return all.map(value).reduce(0, +) / Double(max(1, all.count))
            }
            let (rateOn, rateOff) = (mean(true, \.recordsPerSecond), mean(false, \.recordsPerSecond))
            let (cpuOn, cpuOff) = (mean(true) { $0.cpuSeconds / Double(max(1, $0.records)) * 1e6 }, mean(false) { $0.cpuSeconds / Double(max(1, $0.records)) * 1e6 })
            print(
                String(
                    format: "history on / off, means of 4 runs each: %.0f / %.0f records/s = %.3f; CPU %.1f / %.1f µs per record = %+.1f %%",
                    rateOn, rateOff, rateOn / rateOff, cpuOn, cpuOff, (cpuOn / cpuOff - 1) * 100))
        }
        if membershipRule {
            let ruled = try await IngestBenchmark.prepare(folder: folder, subscriptions: subscriptions, v2: v2, members: true, name: "rules")
            let rules = try ReadRules.parse(try JSONParser.parse(Array(IngestBenchmark.membershipRule.utf8)))
            report("pushdispatch, membership rule", try await IngestBenchmark.run(store: ruled, folder: folder, lines: lines, rules: rules, logger: logger))
            let left = try await ruled.subscriptions(app: "bench", after: 0, limit: subscriptions + 1).count
            print("subscriptions left after the run under the rule: \(left) of \(subscriptions) (none may be revoked)")
        }
        if let postgres {
            let store = try await IngestBenchmark.preparePostgres(url: postgres, subscriptions: subscriptions, v2: v2, logger: logger)
            defer { store.close() }
            do {
                report("pushdispatch on PostgreSQL", try await IngestBenchmark.run(store: store, folder: folder, lines: lines, logger: logger))
            } catch {
                try? await store.removeApplication("bench", source: "bench")
                throw error
            }
            try await store.removeApplication("bench", source: "bench")
        }
        if let reference = runReference("bench_ingest_reference.py", [folder + "/records.ndjson", folder]), reference.count == 2 {
            print(String(format: "reference (Python json + sqlite3, same records, same run): %.0f records/s", reference[0] / reference[1]))
        } else {
            print("reference: python3 not available")
        }
    }

    func report(_ name: String, _ result: IngestBenchmark.Result) {
        print(
            String(
                format:
                    "%@: %.0f records/s (%d records in %.2f s, %.1f MB/s of records; %@ payloads, outbox %d rows after coalescing; CPU %.2f s = %.1f µs per record, all threads of this process)",
                name, result.recordsPerSecond, result.records, result.seconds, Double(result.lineBytes) / result.seconds / 1e6, v2 ? "v2 HS256" : "v1",
                result.notifications, result.cpuSeconds, result.cpuSeconds / Double(max(1, result.records)) * 1e6))
        if let evaluation = result.evaluationSeconds {
            print(String(format: "  every subscription evaluated once against the loaded tree (the audit at start): %.1f ms", evaluation * 1000))
        }
        fflush(nil)
    }
}

struct BenchRestart: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restart",
        abstract: "Restart with a large tree: snapshot + journal restored as at start, memory per byte of tree, with a Python reference.")

    @Option(help: "Size of the tree's compact JSON, in MB.") var megabytes = 100
    @Option(help: "Records in the journal after the snapshot.") var journal = 100_000
    @Option(help: .hidden) var loadOnly: String?

    func run() async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .warning
        if let loadOnly {
            // The child: a fresh process restores the store, as a restarted service would, so
            // the memory the trees hold is not hidden by pages the preparation freed.
            let (result, trees) = try await RestartBenchmark.run(store: try SQLiteStore(path: loadOnly), logger: logger)
            print(result.seconds, result.residentBytes, result.snapshotBytes, result.journalRecords)
            withExtendedLifetime(trees) {}
            return
        }
        let folder = try temporaryFolder("restart")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (store, snapshot) = try await RestartBenchmark.prepare(folder: folder, megabytes: megabytes, journalRecords: journal)
        try Data(snapshot).write(to: URL(fileURLWithPath: folder + "/snapshot.json"))
        withExtendedLifetime(store) {}
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        child.arguments = ["restart", "--load-only", folder + "/restart.db"]
        let pipe = Pipe()
        child.standardOutput = pipe
        try child.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        let fields = output.split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
        guard child.terminationStatus == 0, fields.count == 4 else {
            throw ValidationError("the restoring process failed (status \(child.terminationStatus)): \(output)")
        }
        print(
            String(
                format: "pushdispatch: restored a %.1f MB snapshot and %.0f journal records in %.2f s (a fresh process); the trees hold %.1f MB resident (%.2f bytes per byte of compact JSON)",
                fields[2] / 1e6, fields[3], fields[0], fields[1] / 1e6, fields[1] / fields[2]))
        let result = (snapshotBytes: Int(fields[2]), seconds: fields[0])
        if let reference = runReference("bench_restart_reference.py", [folder + "/snapshot.json"]), reference.count == 2 {
            print(
                String(
                    format: "reference (Python json.loads of the same snapshot, same run): %.2f s, %.1f MB resident (%.2f bytes per byte)",
                    reference[0], reference[1] / 1e6, reference[1] / Double(result.snapshotBytes)))
        }
    }
}
