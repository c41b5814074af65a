import ArgumentParser
import Foundation
import PushCore
import PushJSON
import PushFakes
import PushTestSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `pushdispatch-bench pipeline`: the whole service as a user runs it (`pushdispatch run`, a
/// child process, durable SQLite outbox), records through its Unix socket, deliveries to a fake
/// FCM over TLS + HTTP/2.
///
/// - `--rate R --seconds S` (open loop): R records a second, each to a distinct device, sent on
///   schedule whatever the answers; the fake is the in-process one of PushTestSupport, which
///   notes when each request arrived and was answered (µs). Reports p50/p99/p99.9 of record
///   acknowledged → request on the wire, and → provider answer.
/// - `--burst N`: N records at once, delivered to nginx (`run_peer_tls.sh --serve`); reports the
///   time until every one is delivered, and how many sends were retried (a request that reached
///   its deadline would be).
struct BenchPipeline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pipeline",
        abstract: "Records through `pushdispatch run` to a fake FCM over TLS + HTTP/2: latency at a steady rate, or a burst.")

    @Option(help: "Records per second (open loop).") var rate = 5_000
    @Option(help: "Seconds at that rate.") var seconds = 30.0
    @Option(help: "Instead of a rate: this many records at once, delivered to nginx.") var burst: Int?
    @Option(help: "Devices (one subscription each); each record goes to the next one. At least the number of records (the default).") var devices: Int?
    @Option(help: "The folder of run_peer_tls.sh.") var peer: String?
    @Flag(help: "Delivery off (delivery.enabled: false): what ingestion alone costs at that rate.") var ingestOnly = false
    @Flag(help: "Also print, second by second, the median and the largest time from acknowledgement to answer.") var timeline = false

    func run() async throws {
        let folder = try temporaryFolder("pipeline")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let count = burst ?? Int(Double(rate) * seconds)
        guard count > 0 else { throw ValidationError("nothing to send: --rate and --seconds (or --burst) must make at least one record") }
        let devices = self.devices ?? count
        // Two records for one device while its first notification waits: the newer value
        // replaces the older one (SPEC §8), fewer deliveries than records, and the run would wait
        // for answers that never come.
        guard devices >= count else {
            throw ValidationError(
                "--devices \(devices) is below the \(count) records: a device's waiting value notification is replaced by a newer one, so some records would never be delivered; each record needs a device of its own")
        }
        let store = try await IngestBenchmark.prepare(folder: folder, subscriptions: devices, v2: false)
        store.close()

        // The provider: nginx for a burst, the recording fake for latency.
        var fakes: FakeProviders?
        var nginxPID: Int32?
        var endpoint: String
        var caFile = ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path
        var serviceAccount: [UInt8]
        if burst != nil {
            let fake = try PeerFake.start(tls: true, folder: peer)
            endpoint = fake.base
            caFile = fake.caFile ?? caFile
            nginxPID = fake.pid
            serviceAccount = try BenchDeliver.serviceAccountJSON(tokenURI: endpoint + "/token")
        } else {
            let started = try await FakeProviders.start(tls: true)
            fakes = started
            endpoint = started.fcmEndpoint
            serviceAccount = started.serviceAccountJSON
        }
        defer { if let nginxPID { kill(nginxPID, SIGTERM) } }
        try Data(serviceAccount).write(to: URL(fileURLWithPath: folder + "/service-account.json"))
        let port = try HTTP2TestServer.freePort()
        try Data(
            """
            store: {sqlite: \(folder)/bench.db}
            ingest: {socket: \(folder)/in.sock, deadLetter: \(folder)/dead.ndjson}
            http: {port: \(port)}
            delivery: {caFile: \(caFile), timeout: 10s, enabled: \(!ingestOnly)}
            apps:
              bench:
                auth: {hs256Secret: "bench-secret-of-at-least-thirty-two-bytes"}
                fcm: {serviceAccountFile: \(folder)/service-account.json, endpoint: "\(endpoint)"}
            """.utf8
        ).write(to: URL(fileURLWithPath: folder + "/pushdispatch.yaml"))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: folder + "/service-account.json")

        // Dies with this process (however it ends).
        let service = TestProcesses.make(
            URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("pushdispatch"),
            ["run", "--config", folder + "/pushdispatch.yaml", "--log-level", timeline ? "info" : "warning"])
        let serviceLog = Pipe()
        service.standardError = serviceLog
        service.standardOutput = serviceLog
        let logText = Mutex("")
        serviceLog.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            logText.withLock { $0 += String(decoding: data, as: UTF8.self) }
        }
        try TestProcesses.launch(service)
        defer { if service.isRunning { service.terminate() } }
        var connected: SocketClient?
        for _ in 0..<500 where connected == nil && service.isRunning {
            try await Task.sleep(for: .milliseconds(20))
            connected = try? SocketClient(path: folder + "/in.sock")
        }
        guard let client = connected else { throw ValidationError("pushdispatch run did not start: \(logText.withLock { $0 }.suffix(2000))") }

        // Record seq s writes {"n": s} to device (s-1) % devices.
        func line(_ seq: Int) -> String {
            #"{"seq":\#(seq),"app":"bench","op":"put","path":"/users/user\#((seq - 1) % devices)/inbox","data":{"n":\#(seq),"text":"hello from the benchmark"}}"#
        }
        let acks = AckLog(count: count)
        let reader = Thread { acks.read(client) }
        reader.start()
        let cpuBefore = (ProcessCPU.microseconds(pid: service.processIdentifier) ?? 0)
        let start = FakeProviders.wallMicros()
        if burst != nil {
            client.send((1...count).map(line).joined(separator: "\n") + "\n")
        } else {
            // Open loop: every millisecond, the records due by then.
            var sent = 0
            while sent < count {
                let due = min(count, Int(Double(FakeProviders.wallMicros() - start) / 1_000_000 * Double(rate)) + 1)
                if due > sent {
                    client.send(((sent + 1)...due).map(line).joined(separator: "\n") + "\n")
                    sent = due
                }
                usleep(500)
            }
        }
        let sentSeconds = Double(FakeProviders.wallMicros() - start) / 1e6
        // Every record acknowledged, every notification delivered.
        let deadline = Date().addingTimeInterval(120 + Double(count) / 1_000)
        var delivered = 0
        while Date() < deadline {
            delivered = try fakes.map { $0.received(provider: "fcm").lazy.filter { $0.status == 200 }.count } ?? Self.metric(port, #"pushdispatch_deliveries_total{provider="fcm",outcome="delivered"}"#)
            if (delivered >= count || ingestOnly) && acks.count >= count { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let end = FakeProviders.wallMicros()
        let cpu = (ProcessCPU.microseconds(pid: service.processIdentifier) ?? 0) - cpuBefore
        let retried = try Self.metric(port, #"pushdispatch_retries_total{provider="fcm"}"#)
        let refusals = acks.refusals
        print(
            String(
                format: "pushdispatch run: %d records sent in %.2f s, %d acknowledged, %d delivered in %.2f s from the first send (%.0f/s); %d sends retried; %d refused; service CPU %.1f µs per record (all threads)",
                count, sentSeconds, acks.count, delivered, Double(end - start) / 1e6, Double(delivered) / (Double(end - start) / 1e6), retried,
                refusals, Double(cpu) / Double(count)))
        if delivered < count || acks.count < count {
            print("not all delivered: the service's log ends with:\n\(logText.withLock { $0 }.suffix(3000))")
        }
        if let fakes {
            var wire: [Int64] = []
            var answer: [Int64] = []
            var bySecond: [Int: [Int64]] = [:]
            for message in fakes.received(provider: "fcm") where message.status == 200 {
                guard let data = try? JSONParser.parse(message.data), let d = data["d"]?.stringValue, let value = try? JSONParser.parse(d),
                    let seq = value["n"]?.integerValue, let acked = acks.time(Int(seq))
                else { continue }
                wire.append(message.arrivedMicros - acked)
                answer.append(message.answeredMicros - acked)
                bySecond[Int((acked - start) / 1_000_000), default: []].append(message.answeredMicros - acked)
            }
            if timeline {
                print("the service's log during the run:")
                for line in logText.withLock({ $0 }).split(separator: "\n").suffix(40) { print("  " + line.prefix(220)) }
                print("first send at \(Date(timeIntervalSince1970: Double(start) / 1e6))")
                for second in bySecond.keys.sorted() {
                    let values = bySecond[second]!.sorted()
                    print(String(format: "  second %3d: %5d records, median %.2f ms, max %.2f ms", second, values.count, Double(values[values.count / 2]) / 1000, Double(values.last!) / 1000))
                }
            }
            print("record acknowledged → request on the wire: \(Self.percentiles(wire))")
            print("record acknowledged → provider answer:     \(Self.percentiles(answer))")
            await fakes.stop()
        }
        service.terminate()
        service.waitUntilExit()
    }

    static func percentiles(_ values: [Int64]) -> String {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return "no samples" }
        func at(_ p: Double) -> String {
            String(format: "%.2f ms", Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000)
        }
        return "p50 \(at(0.5)), p99 \(at(0.99)), p99.9 \(at(0.999)), max \(at(1)) (\(sorted.count) samples)"
    }

    /// A sample of the Prometheus text of `/metrics` (0 when absent).
    static func metric(_ port: Int, _ name: String) throws -> Int {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["-s", "http://127.0.0.1:\(port)/metrics"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return line.split(separator: " ").last.flatMap { Double($0) }.map { Int($0) } ?? 0
        }
        return 0
    }
}

/// When each record's answer came back (µs since the epoch), read on its own thread.
final class AckLog: Sendable {
    let times: Mutex<[Int64]>
    let state = Mutex<(count: Int, refusals: Int)>((0, 0))

    init(count: Int) { times = Mutex(Array(repeating: 0, count: count + 1)) }

    var count: Int { state.withLock { $0.count } }
    var refusals: Int { state.withLock { $0.refusals } }
    func time(_ seq: Int) -> Int64? { times.withLock { seq > 0 && seq < $0.count && $0[seq] > 0 ? $0[seq] : nil } }

    func read(_ client: SocketClient) {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var pending: [UInt8] = []
        while true {
            let read = buffer.withUnsafeMutableBytes { recv(client.descriptor, $0.baseAddress, $0.count, 0) }
            if read <= 0 { return }
            let now = FakeProviders.wallMicros()
            pending += buffer[0..<read]
            var start = 0
            while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                let answer = pending[start..<newline]
                start = newline + 1
                // {"seq":N,"ok":true}
                guard answer.count > 7, let comma = answer.firstIndex(of: UInt8(ascii: ",")),
                    let seq = Int(String(decoding: answer[(answer.startIndex + 7)..<comma], as: UTF8.self))
                else { continue }
                let ok = answer.starts(with: Array(#"{"seq":"#.utf8)) && String(decoding: answer, as: UTF8.self).contains(#""ok":true"#)
                times.withLock { if seq > 0 && seq < $0.count { $0[seq] = now } }
                state.withLock {
                    $0.count += 1
                    if !ok { $0.refusals += 1 }
                }
            }
            pending.removeFirst(start)
        }
    }
}
