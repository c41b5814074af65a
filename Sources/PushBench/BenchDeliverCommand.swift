import ArgumentParser
import Foundation
import Logging
import CryptoExtras
import PushCore
import PushDelivery
import PushJOSE
import PushService
import PushStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `pushdispatch-bench deliver`: notifications from a real SQLite outbox to a fake FCM over
/// loopback (the shared nginx fake of `../shared/bench`), through the service's dispatcher and
/// FCM sender; then, in the same run and against the same fake, the official firebase-admin
/// Python SDK sending the same number of messages.
struct BenchDeliver: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliver",
        abstract: "Deliveries per second from the outbox to a local fake FCM, with firebase-admin on the same fake in the same run.")

    @Option(help: "Notifications to deliver (one per subscription).") var messages = 20_000
    @Option(help: "Independent HTTP clients the sends are spread over.") var clients = 2
    @Option(help: "Sends at once (per provider and per application; the service's default per application is 64).") var concurrency = 64
    @Option(help: "The fake FCM's URL; default: start ../shared/bench/run_peer.sh --serve.") var url: String?
    @Option(help: "The folder of run_peer.sh and firebase_admin_peer.py.") var peer: String?
    @Flag(help: "Skip the firebase-admin run.") var noPeer = false
    @Option(help: "Use this PostgreSQL database's outbox (emptied first) instead of SQLite: postgres://user@host:port/db.") var postgres: String?
    @Option(help: "With --postgres: worker processes claiming from the shared outbox side by side, as instances do.") var instances = 1
    @Option(help: ArgumentHelp("(internal) run as a worker with this claimant", visibility: .hidden)) var worker: String?

    func run() async throws {
        // Sources/PushBench/ → the repository → its folder, where `shared/` sits beside it.
        let peerFolder = peer ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("shared/bench").path
        var nginxPID: Int32?
        var base = url ?? ""
        if url == nil {
            // nginx daemonises with the script's output open: run it through the shell into a
            // file (Foundation's Process waits for the daemon too).
            let log = NSTemporaryDirectory() + "pushdispatch-peer-\(UUID().uuidString).txt"
            defer { try? FileManager.default.removeItem(atPath: log) }
            // Children inherit this thread's blocked signals; nginx must be able to get SIGTERM.
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_UNBLOCK, &all, nil)
            let status = system("bash '\(peerFolder)/run_peer.sh' --serve > '\(log)' 2>&1 < /dev/null")
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            guard status == 0, let pid = text.split(separator: " ").last.flatMap({ Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
            else { throw ValidationError("run_peer.sh --serve failed: \(text)") }
            nginxPID = pid
            base = "http://127.0.0.1:\(ProcessInfo.processInfo.environment["PORT"] ?? "18090")"
        }
        defer { if let nginxPID { kill(nginxPID, SIGTERM) } }
        if let postgres {
            try await runOnPostgres(url: postgres, base: base)
            return
        }

        let folder = try temporaryFolder("deliver")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try await IngestBenchmark.prepare(folder: folder, subscriptions: messages, v2: false)
        let subscriptions = try await store.subscriptions(app: "bench", after: 0, limit: messages)
        let payload = Array(
            #"{"s":"OK","t":"value","app":"bench","sp":"/some/webcom/path","d":"{\"a\":\"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj\"}"}"#.utf8)
        let now: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
        var batch = CommitBatch(now: now())
        batch.operations = subscriptions.map { subscription in
            .notify(
                OutboxEntry(
                    app: "bench", subscriptionHandle: subscription.handle!, subscriptionID: subscription.id, kind: .mobile,
                    target: subscription.tuple.context, destination: nil, notification: .value, payload: payload, recordSeq: 1))
        }
        _ = try await store.commit(batch)

        let key = try Self.serviceAccount(tokenURI: base + "/token")
        let transport = try AsyncHTTPTransport(clients: clients)
        let context = SenderContext(transport: transport, timeout: .seconds(10), clock: SystemClock())
        let answers = AnswerLog()
        let sender = LoggingSender(inner: FCMSender(key: key, endpoint: base, context: context), log: answers)
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let dispatcher = Dispatcher(
            store: store, senders: OneSender(sender: sender),
            configuration: .init(perProvider: concurrency, perApp: concurrency, maximumInFlight: concurrency * 2),
            notices: NoNotices(), index: NoIndex(), clock: SystemClock(), logger: logger)
        let start = ContinuousClock.now
        let task = Task { try await dispatcher.run() }
        while try await store.outboxDepth().count > 0 {
            try await Task.sleep(for: .milliseconds(10))
        }
        let elapsed = ContinuousClock.now - start
        task.cancel()
        _ = try? await task.value
        try await transport.shutdown()
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let delivered = dispatcher.counters.deliveries(provider: "fcm", outcome: "delivered")
        let sorted = answers.values.map { $0.answered - $0.committed }.sorted()
        func percentile(_ p: Double) -> Int64 { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
        print(
            String(
                format: "pushdispatch: %d/%d delivered in %.2f s = %.0f deliveries/s (%d clients, %d at once); outbox commit → answer p50 %d ms, p99 %d ms",
                delivered, messages, seconds, Double(delivered) / seconds, clients, concurrency, percentile(0.5), percentile(0.99)))
        fflush(nil)

        guard !noPeer else { return }
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-W", "ignore", peerFolder + "/firebase_admin_peer.py", "--url", base, "--n", String(messages)]
        try python.run()
        python.waitUntilExit()
    }

    /// The same deliveries from a PostgreSQL outbox, by `instances` worker processes claiming side
    /// by side (`FOR UPDATE SKIP LOCKED`); the rate counts from the first worker's first answer
    /// to the last one's last, so process start-up is left out.
    func runOnPostgres(url: String, base: String) async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let store = try await PostgresStore.open(url: url, logger: logger)
        defer { store.close() }
        let now: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
        if let worker {
            let key = try Self.serviceAccount(tokenURI: base + "/token")
            let transport = try AsyncHTTPTransport(clients: clients)
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
                try await Task.sleep(for: .milliseconds(10))
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
        try await store.client.query("TRUNCATE notification")
        let payload = Array(
            #"{"s":"OK","t":"value","app":"bench","sp":"/some/webcom/path","d":"{\"a\":\"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj\"}"}"#.utf8)
        let created = now()
        let entries = (0..<messages).map { n in
            OutboxEntry(
                app: "bench", subscriptionHandle: Int64(n + 1), subscriptionID: "s\(n)", kind: .mobile, target: "token-\(n)", destination: nil,
                notification: .childEvent, payload: payload, recordSeq: 1)
        }
        try await store.fillOutbox(entries, now: created)
        var children: [(Process, Pipe)] = []
        for index in 1...max(1, instances) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            process.arguments = [
                "deliver", "--postgres", url, "--url", base, "--worker", "node-\(index)", "--clients", String(clients),
                "--concurrency", String(concurrency), "--messages", String(messages), "--no-peer",
            ]
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
                format: "pushdispatch on PostgreSQL, %d instance(s): %d/%d delivered in %.2f s = %.0f deliveries/s (%d clients, %d at once each)",
                instances, delivered, messages, seconds, Double(delivered) / seconds, clients, concurrency))
        fflush(nil)
    }

    /// A service-account key whose `token_uri` is the fake's.
    static func serviceAccount(tokenURI: String) throws -> ServiceAccountKey {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        var writer = JSONWriter()
        writer.write([
            "type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": .string(key.pemRepresentation),
            "client_email": "bench@p.iam.gserviceaccount.com", "token_uri": .string(tokenURI),
        ])
        return try ServiceAccountKey(json: writer.bytes)
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
    let inner: FCMSender
    let log: AnswerLog
    var provider: String { inner.provider }

    func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome {
        let outcome = await inner.send(notification, now: now)
        log.add(committed: notification.createdAt, answered: Int64(Date().timeIntervalSince1970 * 1000))
        return outcome
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
