import ArgumentParser
import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import PushCore
import PushFakes
import PushJOSE
import PushJSON
import PushTestSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `pushdispatch-bench soak`: `pushdispatch run` as the README starts it (SQLite, the socket),
/// fed a steady rate of records for a long time while its providers flap: FCM answers 503 for
/// ten seconds of every minute, a webhook answers after the request timeout (every send times
/// out), the push service answers 429 with `Retry-After: 5` for ten seconds of every minute.
/// Every ten seconds it samples the process's resident memory and file descriptors, the
/// outbox's depth and oldest age, deliveries and the p99 of delivery latency over the interval;
/// a CSV and a summary (first and last five minutes side by side) say whether they stay flat
/// (issue 33). Not in CI: `scripts/soak.sh` runs it and plots the CSV.
struct BenchSoak: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak", abstract: "pushdispatch run for a long time at a steady rate with flapping providers; memory, descriptors, outbox and latency sampled.")

    @Option(help: "Minutes to run.") var minutes = 30.0
    @Option(help: "Records per second through the socket.") var rate = 2_000
    @Option(help: "FCM subscriptions (mobile).") var fcm = 100
    @Option(help: "Webhook subscriptions that answer at once, and that never answer in time.") var webhooks = 20
    @Option(help: "Web Push subscriptions (one push service).") var browsers = 10
    @Option(help: "The pushdispatch executable (default: beside this one).") var bin: String?
    @Option(help: "Where the samples go (CSV).") var out = "soak.csv"

    func run() async throws {
        let executable = bin ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("pushdispatch").path
        let fakes = try await FakeProviders.start(tls: true, webhooks: ["fast": "whsec_c29hay1mYXN0LXNlY3JldC0xMjM0NTY=", "slow": "whsec_c29hay1zbG93LXNlY3JldC0xMjM0NTY="])
        fakes.keepReceived(false)
        let vapid = P256.Signing.PrivateKey()
        fakes.setWebPushVAPIDKey(Base64URL.encodeToString(vapid.publicKey.x963Representation))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-soak-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
        try Data(vapid.pemRepresentation.utf8).write(to: folder.appendingPathComponent("vapid.pem"))
        for file in ["service-account.json", "vapid.pem"] {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: folder.appendingPathComponent(file).path)
        }
        let secret = "soak-secret-of-at-least-thirty-two-bytes"
        let port = try HTTP2TestServer.freePort()
        let config = """
            store: {sqlite: ./store.db}
            ingest: {socket: ./in.sock, deadLetter: ./dead.ndjson}
            http: {port: \(port)}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 10s}
            apps:
              soak:
                auth: {hs256Secret: "\(secret)"}
                rules: {rules: {".read": "auth != null"}}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
                webpush: {vapidPrivateKey: file:./vapid.pem, subject: "mailto:soak@example.com", allowPrivateAddresses: true}
                webhooks:
                  fast: {url: "\(fakes.webhookURL("fast"))", secret: "whsec_c29hay1mYXN0LXNlY3JldC0xMjM0NTY="}
                  slow: {url: "\(fakes.webhookURL("slow"))", secret: "whsec_c29hay1zbG93LXNlY3JldC0xMjM0NTY="}

            """
        try Data(config.utf8).write(to: folder.appendingPathComponent("pushdispatch.yaml"))
        say("soak: \(folder.path), http port \(port)")

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["run", "--config", folder.appendingPathComponent("pushdispatch.yaml").path]
        process.currentDirectoryURL = folder
        let log = FileHandle(forWritingAtPath: folder.appendingPathComponent("service.log").path) ?? {
            FileManager.default.createFile(atPath: folder.appendingPathComponent("service.log").path, contents: nil)
            return FileHandle(forWritingAtPath: folder.appendingPathComponent("service.log").path)!
        }()
        process.standardOutput = log
        process.standardError = log
        try process.run()
        defer { process.terminate() }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            try await soak(client: client, process: process, folder: folder, fakes: fakes, port: port, secret: secret)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try? await client.shutdown()
    }

    func soak(client: HTTPClient, process: Process, folder: URL, fakes: FakeProviders, port: Int, secret: String) async throws {
        let base = "http://127.0.0.1:\(port)"
        for _ in 0..<300 {
            guard process.isRunning else {
                throw ValidationError("pushdispatch run stopped: " + ((try? String(contentsOfFile: folder.appendingPathComponent("service.log").path, encoding: .utf8)) ?? ""))
            }
            if let (status, _) = try? await Self.request(client, base + "/readyz"), status == 200 { break }
            try await Task.sleep(for: .milliseconds(200))
        }

        // Subscriptions, one node each: /u/<n>.
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        func token(_ user: String) throws -> String {
            String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(Array(#"{"sub":"\#(user)","exp":4000000000}"#.utf8)), as: UTF8.self)
        }
        var bodies: [String] = []
        // FCM: childEvent, every record one notification (none merges); webhooks and browsers:
        // value, a newer value takes a waiting one's place (a receiver that never answers in
        // time holds one notification, not a growing queue).
        for n in 0..<fcm { bodies.append(#"{"kind":"mobile","mode":"childEvent","path":"/u/\#(bodies.count)","context":"soak-device-\#(n)"}"#) }
        for n in 0..<webhooks { bodies.append(#"{"kind":"webhook","mode":"value","path":"/u/\#(bodies.count)","destination":"\#(n % 2 == 0 ? "fast" : "slow")"}"#) }
        for n in 0..<browsers {
            bodies.append(#"{"kind":"webpush","mode":"value","path":"/u/\#(bodies.count)","context":\#(fakes.webPushSubscription("soak-browser-\(n)"))}"#)
        }
        for (n, body) in bodies.enumerated() {
            let (status, answer) = try await Self.request(client, base + "/datasync/v2/soak/subscriptions/user\(n)", body: body, token: try token("user\(n)"))
            guard status == 201 || status == 200 else { throw ValidationError("subscribing: \(status) \(answer)") }
        }
        // Answered after the service's 10 s deadline, with a status of its own (504) so that
        // the fake's counts tell these late answers apart (the service has given up on them).
        fakes.setStanding("webhook:slow", .slow(.seconds(15), then: .status(504)))
        say("soak: \(bodies.count) subscriptions; \(rate) records/s for \(minutes) min")

        // The feeder: paced batches every 50 ms; the answers read and counted on a thread.
        let socket = try UnixLineClient(path: folder.appendingPathComponent("in.sock").path)
        let answers = Atomic<Int>(0)
        let reader = Thread { socket.readLines { ok in if ok { answers.add(1, ordering: .relaxed) } } }
        reader.start()
        var csv = "seconds,rss_mib,fds,outbox_depth,oldest_age_s,records_acked,delivered,delivered_per_s,p99_ms,fcm_503,webhook_timeouts,webpush_429\n"
        let start = Date()
        var seq: Int64 = 0
        var nextSample = 10.0
        var previous = Sample()
        var rows: [Sample] = []
        let perBatch = max(1, rate / 20)
        while true {
            let elapsed = Date().timeIntervalSince(start)
            if elapsed >= minutes * 60 { break }
            // Flaps, on a one-minute cycle.
            let phase = Int(elapsed) % 60
            let fcmDown = phase < 10
            let pushThrottled = phase >= 30 && phase < 40
            for n in 0..<fcm {
                fakes.setStanding("soak-device-\(n)", fcmDown ? .recorded("fcm-unavailable") : nil)
            }
            for n in 0..<browsers { fakes.setStanding("soak-browser-\(n)", pushThrottled ? .status(429, body: "{}", retryAfter: "5") : nil) }
            var lines = ""
            for _ in 0..<perBatch {
                seq += 1
                lines += #"{"seq":\#(seq),"app":"soak","op":"put","path":"/u/\#(Int(seq) % bodies.count)","data":{"n":\#(seq),"at":\#(Int64(Date().timeIntervalSince1970 * 1000))}}"#
                lines += "\n"
            }
            try socket.write(lines)
            if elapsed >= nextSample {
                nextSample += 10
                var sample = try await Self.sample(client, base, pid: process.processIdentifier)
                sample.seconds = elapsed
                sample.acked = answers.load(ordering: .relaxed)
                let answered = fakes.answered
                sample.fcm503 = answered["fcm/503"] ?? 0
                sample.webhookTimeouts = answered["webhook/504"] ?? 0
                sample.webpush429 = answered["webpush/429"] ?? 0
                let rate = Double(sample.delivered - previous.delivered) / max(1, sample.seconds - previous.seconds)
                let p99 = Self.percentile(0.99, now: sample.buckets, before: previous.buckets)
                csv += String(
                    format: "%.0f,%.1f,%d,%.0f,%.1f,%d,%.0f,%.0f,%.0f,%d,%d,%d\n", sample.seconds, sample.rssMiB, sample.fds, sample.depth, sample.oldestAge,
                    sample.acked, sample.delivered, rate, p99 * 1000, sample.fcm503, sample.webhookTimeouts, sample.webpush429)
                try csv.write(toFile: out, atomically: true, encoding: .utf8)
                say(String(format: "t=%4.0fs rss=%.1fMiB fds=%d outbox=%.0f oldest=%.1fs acked=%d delivered/s=%.0f p99=%.0fms", sample.seconds, sample.rssMiB, sample.fds, sample.depth, sample.oldestAge, sample.acked, rate, p99 * 1000))
                rows.append(sample)
                previous = sample
            }
            let target = Double(seq) / Double(rate)
            let ahead = target - Date().timeIntervalSince(start)
            if ahead > 0 { try await Task.sleep(for: .milliseconds(Int(ahead * 1000))) }
        }
        socket.shutdown()
        Self.summary(rows)
        say("soak: samples in \(out); the service's folder \(folder.path)")
    }

    struct Sample {
        var seconds = 0.0
        var rssMiB = 0.0
        var fds = 0
        var depth = 0.0
        var oldestAge = 0.0
        var acked = 0
        var delivered = 0.0
        var buckets: [(le: Double, count: Double)] = []
        var fcm503 = 0
        var webhookTimeouts = 0
        var webpush429 = 0
    }

    /// First and last five minutes side by side.
    static func summary(_ rows: [Sample]) {
        guard rows.count >= 4 else { return }
        let window = min(30, rows.count / 2)
        func mean(_ slice: ArraySlice<Sample>, _ value: (Sample) -> Double) -> Double { slice.map(value).reduce(0, +) / Double(slice.count) }
        let first = rows.prefix(window), last = rows.suffix(window)
        for (name, value) in [
            ("rss MiB", { (s: Sample) in s.rssMiB }), ("file descriptors", { Double($0.fds) }), ("outbox depth", { $0.depth }),
            ("oldest age s", { $0.oldestAge }),
        ] as [(String, (Sample) -> Double)] {
            say(String(format: "%-18s first %3d samples %10.1f   last %3d samples %10.1f", name, window, mean(first, value), window, mean(last, value)))
        }
    }

    /// The `q` quantile (seconds) of the latency histogram's increase between two scrapes.
    static func percentile(_ q: Double, now: [(le: Double, count: Double)], before: [(le: Double, count: Double)]) -> Double {
        guard !now.isEmpty else { return 0 }
        let deltas = now.map { bucket in (bucket.le, bucket.count - (before.first { $0.le == bucket.le }?.count ?? 0)) }
        guard let total = deltas.last?.1, total > 0 else { return 0 }
        return deltas.first { $0.1 >= q * total }?.0 ?? deltas.last!.0
    }

    static func sample(_ client: HTTPClient, _ base: String, pid: Int32) async throws -> Sample {
        var sample = Sample()
        let (_, metrics) = try await request(client, base + "/metrics")
        var buckets: [Double: Double] = [:]
        for line in metrics.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            guard parts.count >= 2, let value = Double(parts[parts.count - 1]) else { continue }
            let name = String(parts[0])
            if name == "pushdispatch_outbox_depth" { sample.depth = value }
            if name == "pushdispatch_outbox_oldest_age_seconds" { sample.oldestAge = value }
            if name.hasPrefix("pushdispatch_deliveries_total"), name.contains(#"outcome="delivered""#) { sample.delivered += value }
            if name.hasPrefix("pushdispatch_delivery_latency_seconds_bucket"), let range = name.range(of: #"le=""#) {
                let rest = name[range.upperBound...]
                let text = rest.prefix { $0 != "\"" }
                let le = text == "+Inf" ? Double.infinity : Double(text) ?? .infinity
                buckets[le, default: 0] += value
            }
        }
        sample.buckets = buckets.sorted { $0.key < $1.key }.map { (le: $0.key, count: $0.value) }
        if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kib = Double(line.split(separator: " ").dropFirst().first ?? "")
        {
            sample.rssMiB = kib / 1024
        }
        sample.fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
        return sample
    }

    static func request(_ client: HTTPClient, _ url: String, body: String? = nil, token: String? = nil) async throws -> (Int, String) {
        var request = HTTPClientRequest(url: url)
        if let body {
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        let response = try await client.execute(request, timeout: .seconds(30))
        let collected = try await response.body.collect(upTo: 1 << 24)
        return (Int(response.status.code), String(buffer: collected))
    }
}

/// Lines over a Unix socket, answers read line by line.
final class UnixLineClient: @unchecked Sendable {
    // @unchecked Sendable: one thread writes, one reads; the descriptor is shared by both.
    let descriptor: Int32

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw ValidationError("cannot connect to \(path)") }
    }

    func write(_ text: String) throws {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw ValidationError("the socket closed") }
            offset += sent
        }
    }

    /// Reads answers until the socket closes: `ok` for each line that says `"ok":true`.
    func readLines(_ each: (Bool) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var pending: [UInt8] = []
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return }
            pending += buffer[0..<count]
            // Lines are consumed by index and the consumed prefix dropped once per read: at
            // tens of thousands of answers a second, shifting the buffer for each line would
            // take a core from the service being measured.
            var start = pending.startIndex
            while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = pending[start..<newline]
                each(line.count > 10 && Self.saysOK(line))
                start = newline + 1
            }
            pending.removeSubrange(..<start)
        }
    }

    /// Whether an answer line holds `"ok":true`.
    static func saysOK(_ line: ArraySlice<UInt8>) -> Bool {
        let needle = Array(#""ok":true"#.utf8)
        guard line.count >= needle.count else { return false }
        var index = line.startIndex
        while index + needle.count <= line.endIndex {
            if line[index] == needle[0], line[index..<(index + needle.count)].elementsEqual(needle) { return true }
            index += 1
        }
        return false
    }

    func shutdown() {
        Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
    }
}

/// A line to standard error, at once (standard output to a pipe is buffered until exit).
func say(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
