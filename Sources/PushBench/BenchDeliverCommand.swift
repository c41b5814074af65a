import ArgumentParser
import Crypto
import CryptoExtras
import Foundation
import Logging
import PushContracts
import PushCore
import PushDelivery
import PushFakes
import PushHTTP
import PushJOSE
import PushJSON
import PushMatching
import PushService
import ServiceLifecycle
import PushStore
import PushTestSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `pushdispatch-bench deliver`: notifications from a real SQLite outbox to a fake FCM over
/// loopback (the shared nginx fake of `../shared/bench`), through the service's dispatcher and
/// FCM sender; then, in the same run and against the same fake, the official firebase-admin
/// Python SDK sending the same number of messages.
///
/// `--tls`: the real protocol (TLS + HTTP/2, `run_peer_tls.sh --serve`), the service's HTTP/2
/// transport, and on the same fake h2load (the C limit of the machine) and firebase-admin's
/// `send_each_async`; the product's rate is printed as ratios of both.
struct BenchDeliver: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliver",
        abstract: "Deliveries per second from the outbox to a local fake FCM, with firebase-admin on the same fake in the same run.")

    @Option(help: "Notifications to deliver (one per subscription).") var messages = 20_000
    @Option(help: "Independent HTTP clients the sends are spread over.") var clients = 2
    @Option(help: "Sends at once (per provider and per application: the service's default per application, delivery.concurrency.perApp).") var concurrency = 512
    @Option(help: "The fake FCM's URL; default: start ../shared/bench/run_peer.sh --serve (run_peer_tls.sh with --tls).") var url: String?
    @Flag(help: "TLS + HTTP/2 (the providers' protocol): nginx from run_peer_tls.sh, the service's HTTP/2 transport, h2load and the peer beside it.")
    var tls = false
    @Option(help: "With --tls and --url: the CA file the fake's certificate is signed by.") var caFile: String?
    @Option(help: "With --tls: HTTP/2 connections per provider host (the service's default, delivery.connectionsPerHost).") var connections = 6
    @Flag(help: "With --tls: send through async-http-client (the transport before the HTTP/2 one) instead.") var asyncHTTPClient = false
    @Option(help: "The folder of run_peer.sh and firebase_admin_peer.py.") var peer: String?
    @Flag(help: "Skip the firebase-admin run.") var noPeer = false
    @Option(help: "Pace the sends to this budget (a second; delivery.pacing): one above the rate shows what pacing costs when its budget is not reached. Default: off.") var pacing: Double?
    @Flag(help: "Keep the delivery history (operations.history, on by default in the service): each attempt written with its settlement; prints the storage it took.") var history = false
    @Option(help: "Use this PostgreSQL database's outbox (emptied first) instead of SQLite: postgres://user@host:port/db.") var postgres: String?
    @Flag(help: "With --postgres: leave the filled table without statistics (no ANALYZE), as after a burst into a quiet outbox.") var noAnalyze = false
    @Option(help: "With --postgres: worker processes claiming from the shared outbox side by side, as instances do.") var instances = 1
    @Option(help: ArgumentHelp("(internal) run as a worker with this claimant", visibility: .hidden)) var worker: String?
    @Flag(help: "With --tls: deliver to APNs as well as FCM, on one nginx that answers both (PushTestSupport's, the fixtures' CA), h2load beside them.")
    var apns = false

    func run() async throws {
        if let pacing, !(pacing >= 1 && pacing <= 1_000_000) {
            throw ValidationError("--pacing \(pacing): a budget is 1 to 1,000,000 sends a second, as delivery.pacing's")
        }
        if apns {
            guard tls, url == nil, postgres == nil else {
                throw ValidationError("--apns goes with --tls (APNs speaks HTTP/2 over TLS only), without --url or --postgres: it starts its own fake")
            }
            try await runFCMAndAPNs()
            return
        }
        var fake: PeerFake?
        var base = url ?? ""
        var ca = caFile
        if url == nil {
            let started = try PeerFake.start(tls: tls, folder: peer)
            (fake, base, ca) = (started, started.base, started.caFile)
        }
        let peerFolder = fake?.folder ?? peer ?? PeerFake.defaultFolder
        defer { fake?.stop() }
        let transport = try makeTransport(caFile: ca)
        if let postgres {
            try await runOnPostgres(url: postgres, base: base, transport: transport, ca: ca)
            return
        }

        let key = try Self.serviceAccount(tokenURI: base + "/token")
        let context = SenderContext(transport: transport, timeout: .seconds(10), clock: SystemClock())
        let rate = try await deliverFromSQLite(sender: FCMSender(key: key, endpoint: base, context: context), kind: .fcm, transport: transport)

        var limit: Double?
        if tls, let ca { limit = try Self.h2load(url: base, messages: messages, caFile: ca) }
        guard !noPeer else { return }
        let peer = try PeerFake.firebaseAdmin(base: base, caFile: tls ? ca : nil, folder: peerFolder, messages: messages)
        if let limit { print(String(format: "pushdispatch / h2load: %.1f %%", rate / limit * 100)) }
        if let peer { print(String(format: "pushdispatch / firebase-admin: %.1f×", rate / peer)) }
    }

    func makeTransport(caFile: String?) throws -> any HTTPTransport {
        let fallback = try HTTP1Transport(clients: clients, caFile: caFile)
        if !tls || asyncHTTPClient { return fallback }
        return try HTTP2Transport(configuration: .init(connectionsPerOrigin: connections, caFile: caFile), fallback: fallback, ownsFallback: true)
    }

    /// User and system CPU time of this process so far, in microseconds (every thread).
    static func cpuMicroseconds() -> Int64 {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Int64(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000 + Int64(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
    }

    /// FCM and APNs on one nginx (the fixtures' certificate): the same notifications through
    /// each sender and the dispatcher from a durable SQLite outbox, then h2load on the same
    /// fake, in one run.
    func runFCMAndAPNs() async throws {
        let server = try HTTP2TestServer.nginx()
        defer { server.stop() }
        let base = "https://localhost:\(server.port)"
        let ca = ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path
        var rates: [String: Double] = [:]
        for provider in ["fcm", "apns"] {
            let transport = try makeTransport(caFile: ca)
            let context = SenderContext(transport: transport, timeout: .seconds(10), clock: SystemClock())
            let sender: any NotificationSender
            if provider == "apns" {
                let token = try APNsProviderToken(teamID: "TEAM012345", keyID: "KEY0123456", privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation)
                sender = APNsSender(endpoint: base, topic: "com.example.bench", token: token, storage: 7_200, context: context)
            } else {
                sender = FCMSender(key: try Self.serviceAccount(tokenURI: base + "/token"), endpoint: base, context: context)
            }
            rates[provider] = try await deliverFromSQLite(sender: sender, kind: provider == "apns" ? .apns : .fcm, transport: transport)
        }
        let limit = try Self.h2load(url: base, messages: messages, caFile: ca)
        if let fcm = rates["fcm"], let apns = rates["apns"] {
            print(String(format: "APNs / FCM: %.2f", apns / fcm))
            if let limit { print(String(format: "pushdispatch / h2load: FCM %.1f %%, APNs %.1f %%", fcm / limit * 100, apns / limit * 100)) }
        }
    }

    /// `messages` notifications of `kind` from a new (durable) SQLite outbox through `sender`
    /// and the service's dispatcher; prints and returns deliveries/s, with the CPU per delivery
    /// and the outbox commit → answer percentiles. Shuts `transport` down.
    func deliverFromSQLite(sender inner: any NotificationSender, kind: SubscriptionKind, transport: any HTTPTransport) async throws -> Double {
        let folder = try temporaryFolder("deliver-\(kind.rawValue)")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try await IngestBenchmark.prepare(folder: folder, subscriptions: messages, v2: false)
        let subscriptions = try await store.subscriptions(app: "bench", after: 0, limit: messages)
        let payload = Array(
            #"{"s":"OK","t":"value","app":"bench","sp":"/some/webcom/path","d":"{\"a\":\"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj\"}"}"#.utf8)
        var batch = CommitBatch(now: Int64(Date().timeIntervalSince1970 * 1000))
        batch.operations = subscriptions.enumerated().map { index, subscription in
            .notify(
                OutboxEntry(
                    app: "bench", subscriptionHandle: subscription.handle!, subscriptionID: subscription.id, kind: kind,
                    target: kind == .apns ? String(format: "%064x", index + 1) : subscription.tuple.context, destination: nil, notification: .value,
                    payload: payload, recordSeq: 1))
        }
        _ = try await store.commit(batch)
        let answers = AnswerLog()
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        var configuration = Dispatcher.Configuration(perProvider: concurrency, perApp: concurrency, maximumInFlight: concurrency * 2)
        configuration.keepsHistory = history
        if let pacing { configuration.machine.pacing = PacingTable(byKind: [kind: pacing]) }
        // Traced as the service is, when the environment says so (OTEL_TRACES_EXPORTER=otlp).
        let tracing = try TracingSetup.make(environment: ProcessInfo.processInfo.environment, logger: logger)
        let exporter = tracing.map { tracing in Task { try await tracing.service.run() } }
        defer { exporter?.cancel() }
        let dispatcher = Dispatcher(
            store: store, senders: OneSender(sender: LoggingSender(inner: inner, log: answers)), configuration: configuration,
            notices: NoNotices(), index: NoIndex(), clock: SystemClock(), traces: tracing?.traces, logger: logger)
        FileHandle.standardError.write(Data("delivering \(messages) notifications to \(inner.provider)\n".utf8))
        let start = ContinuousClock.now
        let cpuBefore = Self.cpuMicroseconds()
        let task = Task { try await dispatcher.run() }
        while try await store.outboxDepth().count > 0 { try await Task.sleep(for: .milliseconds(10)) }
        let elapsed = ContinuousClock.now - start
        let cpu = Self.cpuMicroseconds() - cpuBefore
        task.cancel()
        _ = try? await task.value
        try await transport.shutdown()
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let delivered = dispatcher.counters.deliveries(provider: inner.provider.label, outcome: "delivered")
        let sorted = answers.values.map { $0.answered - $0.committed }.sorted()
        func percentile(_ p: Double) -> Int64 { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
        let rate = Double(delivered) / seconds
        let how = tls ? (asyncHTTPClient ? "async-http-client, \(clients) clients" : "HTTP/2, \(connections) connections") : "\(clients) clients"
        print(
            String(
                format: "pushdispatch → %@: %d/%d delivered in %.2f s = %.0f deliveries/s (%@, %d at once); %.1f µs CPU per delivery (all threads); outbox commit → answer p50 %d ms, p99 %d ms",
                inner.provider.label, delivered, messages, seconds, rate, how, concurrency, Double(cpu) / Double(max(1, delivered)), percentile(0.5),
                percentile(0.99)))
        print("history: \(history ? "on" : "off")")
        if history, let storage = try await store.historyStorage() {
            print(
                String(
                    format: "history storage: %d attempts in %.2f MB (table and indexes) = %.0f bytes per attempt = %.0f MB per million attempts",
                    storage.attempts, Double(storage.bytes) / 1e6, Double(storage.bytes) / Double(max(1, storage.attempts)),
                    Double(storage.bytes) / Double(max(1, storage.attempts))))
        }
        fflush(nil)
        return rate
    }

    /// h2load on the same fake, as run_peer_tls.sh runs it (4 connections × 100 streams): its
    /// requests/s, printed; nil when h2load is not installed.
    static func h2load(url: String, messages: Int, caFile: String) throws -> Double? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/h2load") else {
            print("h2load is not installed (apt-get install -y nghttp2-client): no C limit in this run")
            return nil
        }
        let body = NSTemporaryDirectory() + "pushdispatch-h2load-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: body) }
        try Data(
            #"{"message":{"token":"tok-1","data":{"s":"OK","t":"value","app":"toto","sp":"/some/webcom/path","d":"{\"a\":\"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj\"}"},"android":{"priority":"high"},"apns":{"headers":{"apns-priority":"5","apns-push-type":"background"},"payload":{"aps":{"content-available":1}}}}}"#
                .utf8
        ).write(to: URL(fileURLWithPath: body))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/h2load")
        process.arguments = [
            "-n", String(messages), "-c", "4", "-m", "100", "-H", "authorization: Bearer ya29.fake", "-H", "content-type: application/json", "-d", body,
            url + "/v1/projects/p/messages:send",
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("finished in") || $0.hasPrefix("requests:") }
        print("h2load (C, 4 connections × 100 streams): " + lines.joined(separator: "; "))
        // "finished in 0.52s, 38461.54 req/s, 9.10MB/s"
        guard let finished = lines.first(where: { $0.hasPrefix("finished in") }) else { return nil }
        let parts = finished.split(separator: " ")
        return parts.firstIndex { $0.hasPrefix("req/s") }.flatMap { Double(parts[$0 - 1]) }
    }

    /// The same deliveries from a PostgreSQL outbox, by `instances` worker processes claiming side
    /// by side (`FOR UPDATE SKIP LOCKED`); the rate counts from the first worker's first answer
    /// to the last one's last, so process start-up is left out.
    func runOnPostgres(url: String, base: String, transport: any HTTPTransport, ca: String?) async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let store = try await PostgresStore.open(url: url, logger: logger)
        defer { store.close() }
        let now: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
        if let worker {
            let key = try Self.serviceAccount(tokenURI: base + "/token")
            let context = SenderContext(transport: transport, timeout: .seconds(10), clock: SystemClock())
            let answers = AnswerLog()
            let sender = LoggingSender(inner: FCMSender(key: key, endpoint: base, context: context), log: answers)
            let dispatcher = Dispatcher(
                store: store, senders: OneSender(sender: sender),
                configuration: .init(
                    perProvider: concurrency, perApp: concurrency, claimant: worker, maximumInFlight: concurrency * 2, releaseAllAtStart: false),
                notices: NoNotices(), index: NoIndex(), clock: SystemClock(), logger: logger)
            let task = Task { try await dispatcher.run() }
            while try await store.outboxDepth().count > 0 {
                // Not too often: these reads are counted in PostgreSQL's statements (their two
                // statements are left out of the per-delivery figures).
                try await Task.sleep(for: .milliseconds(100))
                dispatcher.nudge()
            }
            task.cancel()
            _ = try? await task.value
            try await transport.shutdown()
            let answered = answers.values.map(\.answered)
            print("worker \(worker) \(dispatcher.counters.deliveries(provider: "fcm", outcome: "delivered")) \(answered.min() ?? 0) \(answered.max() ?? 0)")
            return
        }
        // Fill: one notification per subscription (the outbox's rows are all it needs).
        // DELETE, not TRUNCATE: the outbox's count (`tally`) is kept by row triggers, which
        // TRUNCATE does not fire (the workers wait for it to reach 0).
        try await store.client.query("DELETE FROM notification")
        let payload = Array(
            #"{"s":"OK","t":"value","app":"bench","sp":"/some/webcom/path","d":"{\"a\":\"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj\"}"}"#.utf8)
        let created = now()
        let entries = (0..<messages).map { n in
            OutboxEntry(
                app: "bench", subscriptionHandle: Int64(n + 1), subscriptionID: "s\(n)", kind: .fcm, target: "token-\(n)", destination: nil,
                notification: .childEvent, payload: payload, recordSeq: 1)
        }
        try await store.fillOutbox(entries, now: created)
        // A table in service has statistics (autovacuum analyses it as it changes); one filled a
        // moment ago has none, and the planner, guessing it nearly empty, sorts all of it at
        // every claim.
        if !noAnalyze { _ = try await store.client.query("ANALYZE notification") }
        try await transport.shutdown()  // the workers have theirs
        let server = try await PostgresServerStats(client: store.client)
        try await server.reset()
        let serverCPU0 = server.cpuMicroseconds()
        var children: [(Process, Pipe)] = []
        for index in 1...max(1, instances) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            process.arguments = [
                "deliver", "--postgres", url, "--url", base, "--worker", "node-\(index)", "--clients", String(clients),
                "--concurrency", String(concurrency), "--messages", String(messages), "--no-peer", "--connections", String(connections),
            ] + (tls ? ["--tls"] : []) + (asyncHTTPClient ? ["--async-http-client"] : []) + (ca.map { ["--ca-file", $0] } ?? [])
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            children.append((process, output))
        }
        var delivered = 0
        var first = Int64.max
        var last: Int64 = 0
        for (process, output) in children {
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            let parts = text.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            guard parts.count == 5, let count = Int(parts[2]), let from = Int64(parts[3]), let to = Int64(parts[4]) else {
                throw ValidationError("a worker answered: \(text)")
            }
            delivered += count
            if count > 0 {
                first = min(first, from)
                last = max(last, to)
            }
        }
        let seconds = Double(max(1, last - first)) / 1000
        print(
            String(
                format: "pushdispatch on PostgreSQL, %d instance(s): %d/%d delivered in %.2f s = %.0f deliveries/s (%@, %d at once each)",
                instances, delivered, messages, seconds, Double(delivered) / seconds,
                tls ? (asyncHTTPClient ? "async-http-client, \(clients) clients" : "HTTP/2, \(connections) connections") : "\(clients) clients", concurrency))
        let serverCPU = server.cpuMicroseconds().map { $0 - (serverCPU0 ?? 0) }
        try await server.report(deliveries: delivered, serverCPU: serverCPU0 == nil ? nil : serverCPU)
        fflush(nil)
    }

    /// A service-account key whose `token_uri` is the fake's.
    static func serviceAccount(tokenURI: String) throws -> ServiceAccountKey {
        try ServiceAccountKey(json: try serviceAccountJSON(tokenURI: tokenURI))
    }

    /// The service-account file of a new key whose `token_uri` is the fake's.
    static func serviceAccountJSON(tokenURI: String) throws -> [UInt8] {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        var writer = JSONWriter()
        writer.write([
            "type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": .string(key.pemRepresentation),
            "client_email": "bench@p.iam.gserviceaccount.com", "token_uri": .string(tokenURI),
        ])
        return writer.bytes
    }
}

/// For each answered send: when its notification was committed to the outbox and when the
/// answer came (milliseconds since the epoch).
final class AnswerLog: Sendable {
    let state = Mutex<[(committed: Int64, answered: Int64)]>([])
    func add(committed: Int64, answered: Int64) { state.withLock { $0.append((committed, answered)) } }
    var values: [(committed: Int64, answered: Int64)] { state.withLock { $0 } }
}

/// Sends through `inner` and notes each answer in `log`.
struct LoggingSender: NotificationSender {
    let inner: any NotificationSender
    let log: AnswerLog
    var provider: Provider { inner.provider }

    func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome {
        let outcome = await inner.send(notification, now: now)
        log.add(committed: notification.createdAt, answered: Int64(Date().timeIntervalSince1970 * 1000))
        return outcome
    }

    func start(_ notification: StoredNotification, now: Int64, completion: @escaping @Sendable (DeliveryOutcome) -> Void) -> Bool {
        let log = log
        return inner.start(notification, now: now) { outcome in
            log.add(committed: notification.createdAt, answered: Int64(Date().timeIntervalSince1970 * 1000))
            completion(outcome)
        }
    }
}

struct OneSender: SenderDirectory {
    let sender: any NotificationSender
    func sender(for entry: OutboxEntry) -> (any NotificationSender)? { sender }
}

/// No revoke notifications in this benchmark (the fake accepts every send).
struct NoNotices: RevocationNotices {
    func notice(for entry: OutboxEntry) async -> OutboxEntry? { nil }
}

/// No index follows the benchmark's outbox.
struct NoIndex: SubscriptionIndexFollower {
    func nudge() {}
    func catchUp() async {}
}
