import ArgumentParser
import AsyncHTTPClient
import Foundation
import PushJOSE
import PushTestSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `pushdispatch-bench e2e`: the whole service as a user runs it (issue 35). `pushdispatch run`
/// started as the README says (SQLite, durable commits, the socket), subscriptions made through
/// the REST API, change records written to the socket, deliveries to the shared nginx fake FCM
/// (`--tls`: TLS + HTTP/2, as FCM speaks) counted from `/metrics`. In the same run and on the
/// same fake: h2load (the C limit of the machine) and the official firebase-admin SDK, printed
/// beside the service's rate as ratios; the CPU the service took per record, every thread of
/// it; with `--perf`, where that CPU went.
struct BenchEndToEnd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e2e",
        abstract: "pushdispatch run end to end: records through the socket, deliveries to a local fake FCM, with h2load and firebase-admin on the same fake in the same run.")

    @Option(help: "Change records to write (each one notification to one FCM subscription).") var records = 20_000
    @Option(help: "FCM subscriptions, one node each (records go round them).") var subscriptions = 1_000
    @Option(help: "Records a second, steady (default: as fast as the socket takes them); prints the latency of delivery at that rate.") var rate: Int?
    @Flag(help: "TLS + HTTP/2 (the providers' protocol): nginx from run_peer_tls.sh, h2load beside the service.") var tls = false
    @Option(help: "The pushdispatch executable (default: beside this one).") var bin: String?
    @Option(help: "The folder of run_peer.sh and firebase_admin_peer.py.") var peer: String?
    @Flag(help: "Skip the firebase-admin run.") var noPeer = false
    @Option(help: "Messages firebase-admin sends (default: the records, at most 20,000: its rate does not depend on it).") var peerMessages: Int?
    @Flag(help: "Subscribe in format v2 (each notification's event signed, ES256) instead of v1 (the body h2load and firebase-admin send is a v1 data map).") var v2 = false
    @Flag(help: "Turn the delivery history off (operations.history.maxRows: 0); it is on by default in the service.") var noHistory = false
    @Flag(help: "Ingestion alone (delivery.enabled: false): records through the socket into the outbox, timed to the last acknowledgement; what delivery costs is the difference from a full run.") var ingestOnly = false
    @Flag(help: "Profile the service with perf while it works (perf must be installed); prints where its CPU went.") var perf = false
    @Option(help: "Extra configuration lines for the service's YAML (top level), e.g. 'delivery: {connectionsPerHost: 8}' (replaces the generated delivery block when it starts with 'delivery:').") var extra: String?
    @Option(help: "Subscriptions written into the store before the service starts (1,000,000: the start-up of a large deployment; its time to ready and memory are printed).") var storedSubscriptions: Int?
    @Flag(help: "Keep the service's folder (configuration, store, log, profile).") var keep = false
    @Option(help: "Sends at once per application (delivery.concurrency.perApp; perProvider is raised to match when it is larger than 1,024). Default: the service's, 512.") var concurrency: Int?
    @Option(help: "HTTP/2 connections to the fake FCM (delivery.connectionsPerHost, 1 to 64). Default: the service's, 6.") var connections: Int?

    func run() async throws {
        guard records > 0, subscriptions > 0, records <= 100_000_000, subscriptions <= 1_000_000 else {
            throw ValidationError("--records 1 to 100,000,000, --subscriptions 1 to 1,000,000")
        }
        if let concurrency, !(1...65_536).contains(concurrency) { throw ValidationError("--concurrency 1 to 65,536") }
        if let connections, !(1...64).contains(connections) { throw ValidationError("--connections 1 to 64") }
        let executable = bin ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("pushdispatch").path
        guard FileManager.default.isExecutableFile(atPath: executable) else { throw ValidationError("\(executable) is not an executable: build it, or give --bin") }
        let fake = try PeerFake.start(tls: tls, folder: peer)
        defer { fake.stop() }

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { if !keep { try? FileManager.default.removeItem(at: folder) } }
        let account = folder.appendingPathComponent("service-account.json").path
        let key = Data(try BenchDeliver.serviceAccountJSON(tokenURI: fake.base + "/token"))
        guard FileManager.default.createFile(atPath: account, contents: key, attributes: [.posixPermissions: 0o600]) else {
            throw ValidationError("cannot write \(account)")
        }
        try Data().write(to: folder.appendingPathComponent("queue.ndjson"))
        if let storedSubscriptions {
            guard (1...10_000_000).contains(storedSubscriptions) else { throw ValidationError("--stored-subscriptions 1 to 10,000,000") }
            let started = Date()
            try await IngestBenchmark.prepare(folder: folder.path, subscriptions: storedSubscriptions, v2: false, name: "store").close()
            print(String(format: "%d subscriptions written into the store in %.1f s", storedSubscriptions, Date().timeIntervalSince(started)))
        }
        let secret = "e2e-secret-of-at-least-thirty-two-bytes"
        let port = try HTTP2TestServer.freePort()
        let sends =
            (concurrency.map { "concurrency: {perApp: \($0), perProvider: \(max($0, 1_024))}, " } ?? "")
            + (connections.map { "connectionsPerHost: \($0), " } ?? "")
        var delivery = "delivery: {\(ingestOnly ? "enabled: false, " : "")\(sends)\(fake.caFile.map { "caFile: \"\($0)\", " } ?? "")pacing: {fcm: \"off\"}}"
        var extraLines = extra ?? ""
        if extraLines.hasPrefix("delivery:") { (delivery, extraLines) = (extraLines, "") }
        let config = """
            store: {sqlite: ./store.db}
            ingest: {socket: ./in.sock, queueFile: ./queue.ndjson, deadLetter: ./dead.ndjson}
            http: {port: \(port)}
            \(delivery)
            \(noHistory ? "operations: {history: {maxRows: 0}}" : "")
            \(extraLines)
            apps:
              bench:
                auth: {hs256Secret: "\(secret)"}
                rules: {rules: {".read": "auth != null"}}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fake.base)"}

            """
        try Data(config.utf8).write(to: folder.appendingPathComponent("pushdispatch.yaml"))

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["run", "--config", folder.appendingPathComponent("pushdispatch.yaml").path]
        process.currentDirectoryURL = folder
        let logPath = folder.appendingPathComponent("service.log").path
        try Data().write(to: URL(fileURLWithPath: logPath))
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = log
        process.standardError = log
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let result: Measured
        do {
            result = try await measure(client: client, process: process, folder: folder, port: port, secret: secret, executable: executable, fake: fake)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try? await client.shutdown()
        process.terminate()
        process.waitUntilExit()

        // The references, alone on the machine now, on the same fake.
        var limit: Double?
        if let ca = fake.caFile { limit = try BenchDeliver.h2load(url: fake.base, messages: records, caFile: ca) }
        var admin: Double?
        if !noPeer { admin = try fake.firebaseAdmin(messages: peerMessages ?? min(records, 20_000)) }
        if rate == nil {
            if let limit { print(String(format: "pushdispatch run / h2load: %.1f %%", result.deliveriesPerSecond / limit * 100)) }
            if let admin { print(String(format: "pushdispatch run / firebase-admin: %.1f×", result.deliveriesPerSecond / admin)) }
        }
        if keep { print("the service's folder: \(folder.path)") }
    }

    struct Measured {
        var deliveriesPerSecond: Double
    }

    func measure(client: HTTPClient, process: Process, folder: URL, port: Int, secret: String, executable: String, fake: PeerFake) async throws -> Measured {
        let base = "http://127.0.0.1:\(port)"
        let started = Date()
        var ready = false
        // Up to 10 minutes: a store of millions of subscriptions is loaded into the index first.
        for _ in 0..<12_000 {
            guard process.isRunning else { throw ValidationError("pushdispatch run stopped: " + serviceLog(folder)) }
            if let (status, _) = try? await BenchSoak.request(client, base + "/readyz"), status == 200 {
                ready = true
                break
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        guard ready else { throw ValidationError("pushdispatch run was not ready in 10 minutes: " + serviceLog(folder)) }
        let startUp = Date().timeIntervalSince(started)
        // Idle: after start-up and one scrape of /metrics (as docs/benchmarks.md's earlier figures).
        _ = try await BenchSoak.request(client, base + "/metrics")
        try await Task.sleep(for: .seconds(1))
        let binarySize = ((try? FileManager.default.attributesOfItem(atPath: executable)[.size]) as? NSNumber)?.doubleValue ?? 0
        let early = ProcessCPU.memory(pid: process.processIdentifier)
        // The service lets its start-up code pages go 5 s after it listens (CodePages).
        try await Task.sleep(for: .seconds(6))
        _ = try await BenchSoak.request(client, base + "/metrics")
        try await Task.sleep(for: .seconds(1))
        if let early, let idle = ProcessCPU.memory(pid: process.processIdentifier) {
            print(
                String(
                    format:
                        "pushdispatch run: ready in %.2f s; idle RSS %.1f MiB (anonymous %.1f, file-backed %.1f) 1 s after start-up, %.1f MiB (anonymous %.1f, file-backed %.1f) once its start-up code pages went; binary %.1f MiB",
                    startUp, early.rss, early.anonymous, early.file, idle.rss, idle.anonymous, idle.file, binarySize / 1_048_576))
        }

        // Subscriptions through the REST API, 16 at a time: mobile, childEvent, one node each
        // (every record is one notification: none merges with another).
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        let signer = try JWSSigner(key: key, algorithm: .hs256)
        let subscriptions = self.subscriptions
        let format = v2 ? "v2" : "v1"
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<16 {
                group.addTask {
                    for n in stride(from: worker, to: subscriptions, by: 16) {
                        let token = String(decoding: try signer.sign(Array(#"{"sub":"user\#(n)","exp":4000000000}"#.utf8)), as: UTF8.self)
                        let body = #"{"kind":"mobile","mode":"childEvent","format":"\#(format)","path":"/u/\#(n)","context":"e2e-device-\#(n)"}"#
                        let (status, answer) = try await BenchSoak.request(client, base + "/datasync/v2/bench/subscriptions/user\(n)", body: body, token: token)
                        guard status == 201 || status == 200 else { throw ValidationError("subscribing: \(status) \(answer)") }
                    }
                }
            }
            try await group.waitForAll()
        }
        let before = try await BenchSoak.sample(client, base, pid: process.processIdentifier)

        // The profile, while the records go through.
        var profiler: Process?
        let profile = folder.appendingPathComponent("perf.data").path
        if perf {
            let perfProcess = Process()
            perfProcess.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            perfProcess.arguments = ["perf", "record", "-F", "199", "-g", "-p", String(process.processIdentifier), "-o", profile]
            perfProcess.standardOutput = FileHandle.nullDevice
            perfProcess.standardError = FileHandle.nullDevice
            try perfProcess.runUnblocked()
            profiler = perfProcess
            try await Task.sleep(for: .milliseconds(500))
        }

        // The records: batches of lines on the socket; the answers counted on a thread.
        let socket = try UnixLineClient(path: folder.appendingPathComponent("in.sock").path)
        let answers = Atomic<Int>(0)
        let refused = Atomic<Int>(0)
        let reader = Thread {
            socket.readLines { ok in
                answers.add(1, ordering: .relaxed)
                if !ok { refused.add(1, ordering: .relaxed) }
            }
        }
        reader.start()
        let serviceCPU0 = ProcessCPU.microseconds(pid: process.processIdentifier) ?? 0
        let switches0 = ProcessCPU.contextSwitches(pid: process.processIdentifier)
        let nginxCPU0 = fake.cpuMicroseconds()
        let benchCPU0 = BenchDeliver.cpuMicroseconds()
        let start = Date()
        let batch = rate.map { max(1, $0 / 100) } ?? 256
        var acknowledgedAt: Double?
        let feeder = Task.detached { [records, rate, subscriptions] in
            var seq = 0
            while seq < records {
                var lines = ""
                for _ in 0..<min(batch, records - seq) {
                    seq += 1
                    lines += #"{"seq":\#(seq),"app":"bench","op":"put","path":"/u/\#(seq % subscriptions)","data":{"n":\#(seq),"a":"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj"}}"#
                    lines += "\n"
                }
                try socket.write(lines)
                if let rate {
                    let ahead = Double(seq) / Double(rate) - Date().timeIntervalSince(start)
                    if ahead > 0 { try await Task.sleep(for: .microseconds(Int(ahead * 1_000_000))) }
                }
            }
        }
        // Deliveries counted from /metrics every 20 ms until every record's is in; at a steady
        // rate, every 500 ms until the feeder is done (a scrape costs the service ~0.6 ms of
        // CPU: 50 a second would be a third of its CPU at 100 records a second).
        let feedEnds = rate.map { Date().addingTimeInterval(Double(records) / Double($0)) }
        var delivered = 0.0
        var lastProgress = Date()
        var stopped = false
        while ingestOnly ? answers.load(ordering: .relaxed) < records : delivered < before.delivered + Double(records) {
            let feeding = feedEnds.map { Date() < $0 } ?? false
            try await Task.sleep(for: .milliseconds(feeding ? 500 : 20))
            guard process.isRunning else { throw ValidationError("pushdispatch run stopped: " + serviceLog(folder)) }
            if acknowledgedAt == nil, answers.load(ordering: .relaxed) >= records { acknowledgedAt = Date().timeIntervalSince(start) }
            let now = ingestOnly ? Double(answers.load(ordering: .relaxed)) : try await Self.delivered(client, base)
            if now > delivered { lastProgress = Date() }
            delivered = now
            if Date().timeIntervalSince(lastProgress) > 60 {
                throw ValidationError("no delivery for 60 s at \(Int(delivered - before.delivered)) of \(records); the service's log: \(folder.path)/service.log")
            }
            if let profiler, !stopped, (ingestOnly ? delivered : delivered - before.delivered) >= Double(records) * 0.9 {
                profiler.interrupt()
                stopped = true
            }
        }
        let seconds = Date().timeIntervalSince(start)
        try await feeder.value
        if acknowledgedAt == nil { acknowledgedAt = seconds }
        let serviceCPU = (ProcessCPU.microseconds(pid: process.processIdentifier) ?? 0) - serviceCPU0
        let switches = ProcessCPU.contextSwitches(pid: process.processIdentifier)
        let nginxCPU = fake.cpuMicroseconds() - nginxCPU0
        let benchCPU = BenchDeliver.cpuMicroseconds() - benchCPU0
        let after = try await BenchSoak.sample(client, base, pid: process.processIdentifier)
        socket.shutdown()
        if let profiler, !stopped { profiler.interrupt() }
        profiler?.waitUntilExit()

        let perSecond = Double(records) / seconds
        print(
            String(
                format: "pushdispatch run (%@, SQLite, %d subscriptions, %@): %d records → %d deliveries in %.2f s = %.0f %@/s; all acknowledged at %.2f s; %d refused",
                tls ? "TLS + HTTP/2" : "HTTP/1.1", subscriptions, v2 ? "v2, signed" : "v1", records, Int(after.delivered - before.delivered), seconds, perSecond,
                ingestOnly ? "records (ingestion alone)" : "deliveries", acknowledgedAt ?? seconds,
                refused.load(ordering: .relaxed)))
        print(
            String(
                format: "CPU per record: pushdispatch run %.1f µs (%.0f %% of a core), nginx %.1f µs, the feeder %.1f µs; RSS after %.1f MiB",
                Double(serviceCPU) / Double(records), Double(serviceCPU) / seconds / 10_000, Double(nginxCPU) / Double(records),
                Double(benchCPU) / Double(records), after.rssMiB))
        // Each thread a record crosses costs a wake-up (a voluntary switch, later): on a VM whose
        // idle cores are slow to wake, what a record alone pays for most (docs/benchmarks.md).
        if let switches0, let switches {
            print(
                String(
                    format: "context switches per record, pushdispatch run: %.2f voluntary (wake-ups), %.2f preempted",
                    Double(switches.voluntary - switches0.voluntary) / Double(records),
                    Double(switches.involuntary - switches0.involuntary) / Double(records)))
        }
        let p50 = BenchSoak.percentile(0.5, now: after.buckets, before: before.buckets)
        let p99 = BenchSoak.percentile(0.99, now: after.buckets, before: before.buckets)
        print(String(format: "latency, committed → FCM's answer (the histogram's buckets): p50 ≤ %.1f ms, p99 ≤ %.1f ms", p50 * 1000, p99 * 1000))
        if perf { Self.report(profile: profile) }
        return Measured(deliveriesPerSecond: perSecond)
    }

    /// The deliveries counted so far (`pushdispatch_deliveries_total{outcome="delivered"}`).
    static func delivered(_ client: HTTPClient, _ base: String) async throws -> Double {
        let (_, metrics) = try await BenchSoak.request(client, base + "/metrics")
        var total = 0.0
        for line in metrics.split(separator: "\n") where line.hasPrefix("pushdispatch_deliveries_total") && line.contains(#"outcome="delivered""#) {
            total += Double(line.split(separator: " ").last ?? "") ?? 0
        }
        return total
    }

    /// The profile's heaviest functions (self time) and libraries.
    static func report(profile: String) {
        for (title, sort, lines) in [("by library", "dso", 12), ("by function (self)", "dso,symbol", 40)] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["perf", "report", "-i", profile, "--no-children", "--sort", sort, "--stdio", "--percent-limit", "0.4", "-g", "none"]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            guard (try? process.run()) != nil else {
                print("perf report did not run")
                return
            }
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            print("profile, \(title):")
            for line in text.split(separator: "\n").filter({ !$0.hasPrefix("#") && !$0.trimmingCharacters(in: .whitespaces).isEmpty }).prefix(lines) {
                print("  " + line.trimmingCharacters(in: .whitespaces).prefix(150))
            }
        }
    }

    func serviceLog(_ folder: URL) -> String {
        String(((try? String(contentsOfFile: folder.appendingPathComponent("service.log").path, encoding: .utf8)) ?? "").suffix(2000))
    }
}
