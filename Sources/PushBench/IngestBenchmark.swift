import Foundation
import Logging
import PushContracts
import PushCore
import PushEngine
import PushIngest
import PushJOSE
import PushJSON
import PushMatching
import PushService
import ServiceLifecycle
import PushStore

/// The ingestion path measured end to end (`pushdispatch-bench ingest`): record lines through
/// the pipeline (parse, tree, matching, payloads) and committed to a real SQLite store, in the
/// batches the service makes. No source: lines come from memory, so the figure is the
/// pipeline's and the store's.
enum IngestBenchmark {
    public struct Result: Sendable {
        public var records: Int
        public var notifications: Int
        public var seconds: Double
        public var lineBytes: Int
        /// CPU time (user + system) the process used meanwhile, all threads.
        public var cpuSeconds: Double
        /// Under rules: one evaluation of every subscription against the loaded tree (what the
        /// audit at start evaluates), measured apart before the run.
        public var evaluationSeconds: Double? = nil
        public var recordsPerSecond: Double { Double(records) / seconds }
    }

    /// `subscriptions` subscriptions at `/users/{uid}/inbox` (value, v1, or v2 signed with
    /// HS256 when `v2`), and `records` puts of ~`valueBytes` at random users' inboxes: each
    /// record changes one subscription's value.
    public static func prepare(folder: String, subscriptions: Int, v2: Bool, members: Bool = false, name: String = "bench") async throws -> SQLiteStore {
        let store = try SQLiteStore(path: folder + "/\(name).db")
        for chunk in try Self.subscriptions(subscriptions, v2: v2).chunks(ofCount: 50_000) {
            try await store.insert(Array(chunk))
        }
        if members { try await saveMembers(subscriptions, into: store) }
        return store
    }

    /// The membership rule of the `--membership-rule` runs (SPEC §12): a user's inbox is read
    /// by the members listed at `/members/{uid}`, so every subscription's evaluation reads one
    /// path of the tree and every write there evaluates again the subscription it concerns.
    static let membershipRule = """
        {"rules": {"users": {"$uid": {".read": "root.child('members').child($uid).child(auth.uid).val() == true"}}}}
        """

    /// Each user a member of their own inbox's list: a snapshot `{"members": {"user{i}": {"user{i}": true}}}`
    /// in the store, loaded as the service loads it at start.
    static func saveMembers(_ count: Int, into store: any IngestStore) async throws {
        var writer = JSONWriter(capacity: count * 40)
        writer.raw("{\"members\":{")
        // Keys in the tree's order (UTF-8 bytes), as a snapshot holds them.
        for (position, index) in (0..<count).sorted(by: { "user\($0)".utf8.lexicographicallyPrecedes("user\($1)".utf8) }).enumerated() {
            if position > 0 { writer.raw(",") }
            writer.raw(Array(#""user\#(index)":{"user\#(index)":true}"#.utf8))
        }
        writer.raw("}}")
        var batch = CommitBatch(now: 0)
        batch.journal["bench"] = Array("{\"seq\":0,\"app\":\"bench\",\"op\":\"put\",\"path\":\"/\",\"data\":null}\n".utf8)
        let first = try await store.commit(batch).journalIDs["bench"]!
        try await store.saveSnapshot(app: "bench", tree: writer.bytes, through: first)
    }

    /// The same subscriptions in a PostgreSQL database, which must hold none of application
    /// "bench" yet; ``PostgresStore/removeApplication(_:source:)`` takes them (and what the run
    /// wrote) away again.
    public static func preparePostgres(url: String, subscriptions: Int, v2: Bool, logger: Logger) async throws -> PostgresStore {
        let store = try await PostgresStore.open(url: url, logger: logger)
        do {
            if !(try await store.subscriptions(app: "bench", after: 0, limit: 1)).isEmpty {
                throw StoreError.constraint("the database holds subscriptions of application \"bench\" already: run the benchmark on a scratch database")
            }
            for chunk in try Self.subscriptions(subscriptions, v2: v2).chunks(ofCount: 50_000) {
                try await store.insert(Array(chunk))
            }
        } catch {
            store.close()
            throw error
        }
        return store
    }

    static func subscriptions(_ count: Int, v2: Bool) throws -> [Subscription] {
        try (0..<count).map { index in
            let tuple = SubscriptionTuple(
                app: "bench", uid: "user\(index)", kind: .fcm, destination: nil, path: try Path("/users/user\(index)/inbox"),
                context: "fcm-token-\(index)-" + String(repeating: "x", count: 120))
            return Subscription(
                id: SubscriptionID.derive(tuple), tuple: tuple, mode: .value, format: v2 ? .v2 : .v1, encryption: nil, createdAt: 1,
                expiresAt: 4_000_000_000)
        }
    }

    /// The record lines of the run (also written to `folder/records.ndjson` for the reference).
    /// With `membershipEvery` n, every n-th record rewrites a user's members list instead (the
    /// user stays in it, a guest joins): under the membership rule, each evaluates that user's
    /// subscription again.
    public static func records(count: Int, subscriptions: Int, valueBytes: Int, membershipEvery: Int? = nil) -> [[UInt8]] {
        var state: UInt64 = 42
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        let filler = String(repeating: "a", count: max(0, valueBytes - 120))
        return (0..<count).map { seq in
            let user = Int(next() % UInt64(max(1, subscriptions)))
            if let membershipEvery, (seq + 1) % membershipEvery == 0 {
                // The whole list rewritten (the user stays, a guest joins): a write above the
                // path the subscription's evaluation read, so it is evaluated again.
                return Array(
                    #"{"seq":\#(seq + 1),"app":"bench","op":"put","path":"/members/user\#(user)","data":{"guest\#(seq)":true,"user\#(user)":true}}"#.utf8)
            }
            let line =
                #"{"seq":\#(seq + 1),"app":"bench","op":"put","path":"/users/user\#(user)/inbox","data":{"from":"user\#(next() % 1000)","#
                + #""at":\#(1_700_000_000_000 + seq),"read":false,"text":"\#(filler)","n":\#(next() % 100_000)}}"#
            return Array(line.utf8)
        }
    }

    /// Runs `lines` through the pipeline into `store`; `folder` takes the dead-letter file.
    /// `rules`: the application's read rules (SPEC §12), evaluated as the service does.
    public static func run(
        store: any SubscriptionStore & IngestStore, folder: String, lines: [[UInt8]], rules: ReadRules? = nil, keepsHistory: Bool = false, logger: Logger
    ) async throws -> Result {
        let loaded = try await TreeLoader.load(from: store, logger: logger)
        var evaluationSeconds: Double?
        if let rules {
            let subscriptions = try await store.subscriptions(app: "bench", after: 0, limit: Int.max)
            let tree = loaded.processor.trees["bench"] ?? DataTree()
            let start = ContinuousClock.now
            var allowed = 0
            for subscription in subscriptions {
                let auth = ReadRules.auth(uid: subscription.uid, claims: subscription.auth)
                if rules.evaluate(path: subscription.path, auth: auth, tree: tree, now: 0).allowed { allowed += 1 }
            }
            let elapsed = ContinuousClock.now - start
            evaluationSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            precondition(allowed == subscriptions.count, "the membership rule denies \(subscriptions.count - allowed) subscriptions")
        }
        let registry = SubscriptionRegistry(store: store, logger: logger)
        try await registry.load()
        let serviceKey = ServiceKey.generate()
        let hs256 = try JWK(json: ["kty": "oct", "kid": "bench-hs", "alg": "HS256", "k": .string(Base64URL.encodeToString(Array(repeating: 7, count: 32)))])
        let keys = try KeyRing([hs256])
        let sealers = SubscriptionSealers(
            applications: ["bench": .init(keys: keys, signer: try JWSSigner(key: hs256))], fallback: .init(keys: keys, signer: try JWSSigner(key: serviceKey)))
        let queue = IngestQueue()
        let settings = rules.map { ["bench": PipelineSettings(maxWeight: PipelineSettings.standard.maxWeight, rules: $0)] } ?? [:]
        let engine = RecordEngine(
            trees: loaded, settings: settings, sealers: sealers, registry: registry, configuration: .init(keepsHistory: keepsHistory), logger: logger)
        // Traced as the service is, when the environment says so (OTEL_TRACES_EXPORTER=otlp).
        let tracing = try TracingSetup.make(environment: ProcessInfo.processInfo.environment, logger: logger)
        let exporter = tracing.map { tracing in Task { try await tracing.service.run() } }
        defer { exporter?.cancel() }
        let writer = BatchWriter(
            deadLetters: DeadLetterFile(path: folder + "/dead.ndjson", logger: logger), counters: IngestCounters(), index: registry, outbox: NoOutbox(),
            traces: tracing?.traces, logger: logger)
        let ingestor = Ingestor(queue: queue, store: store, checker: LineChecker(), engine: engine, writer: writer, clock: SystemClock(), logger: logger)
        let ingestLines = lines.map { IngestLine(bytes: $0, source: "bench", position: 0) }
        // The service's loop: a source sends lines into the bounded queue, the ingestor takes
        // batches and commits each while processing the next.
        let cpuBefore = processCPUSeconds()
        let start = ContinuousClock.now
        async let sent: Void = {
            for line in ingestLines { await queue.send(line) }
            queue.finish()
        }()
        try await ingestor.run()
        await sent
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let cpu = processCPUSeconds() - cpuBefore
        let notifications = try await store.outboxDepth().count
        return Result(records: lines.count, notifications: notifications, seconds: seconds, lineBytes: lines.reduce(0) { $0 + $1.count },
            cpuSeconds: cpu, evaluationSeconds: evaluationSeconds)
    }
}

/// CPU time (user + system) of the whole process so far, in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
        + Double(usage.ru_stime.tv_usec) / 1e6
}

/// Restart with a large tree (`pushdispatch-bench restart`): a snapshot of about `megabytes`
/// MB and a journal after it, restored as the service does at start.
enum RestartBenchmark {
    public struct Result: Sendable {
        public var snapshotBytes: Int
        public var journalRecords: Int
        public var seconds: Double
        /// Resident memory the restored trees hold, measured as the growth of the process's RSS.
        public var residentBytes: Int
    }

    /// Writes the snapshot (and `journalRecords` records after it) into a store in `folder`;
    /// returns the snapshot's bytes too (for the reference).
    public static func prepare(folder: String, megabytes: Int, journalRecords: Int) async throws -> (SQLiteStore, [UInt8]) {
        let store = try SQLiteStore(path: folder + "/restart.db")
        var writer = JSONWriter(capacity: megabytes << 20 + (1 << 20))
        writer.raw("{\"users\":{")
        var index = 0
        while writer.count < megabytes << 20 {
            if index > 0 { writer.raw(",") }
            writer.writeString("u\(index)")
            let member =
                #":{"name":"User \#(index)","email":"user\#(index)@example.com","age":\#(index % 90),"score":\#(Double(index) / 7),"#
                + #""tags":{"0":"alpha","1":"beta"},"inbox":{"m1":{"from":"u\#(index + 1)","text":"hello there, how are you doing today?","read":false}}}"#
            writer.raw(Array(member.utf8))
            index += 1
        }
        writer.raw("}}")
        // The snapshot must be tree-normalised, in key order: parse and write it back.
        let tree = try JSONParser.parse(writer.bytes)
        var normalised = JSONWriter(capacity: writer.count)
        normalised.write(tree)
        let snapshot = normalised.bytes
        var batch = CommitBatch(now: 0)
        batch.journal["bench"] = Array("{\"seq\":0,\"app\":\"bench\",\"op\":\"put\",\"path\":\"/\",\"data\":null}\n".utf8)
        let first = try await store.commit(batch).journalIDs["bench"]!
        try await store.saveSnapshot(app: "bench", tree: snapshot, through: first)
        var lines: [UInt8] = []
        for seq in 0..<journalRecords {
            lines += Array(#"{"seq":\#(seq + 1),"app":"bench","op":"put","path":"/users/u\#(seq % max(1, index))/inbox/n\#(seq)","data":{"text":"new \#(seq)"}}"#.utf8)
            lines.append(UInt8(ascii: "\n"))
        }
        var journal = CommitBatch(now: 0)
        journal.journal["bench"] = lines
        _ = try await store.commit(journal)
        return (store, snapshot)
    }

    /// Restores the trees as the service does at start.
    public static func run(store: SQLiteStore, logger: Logger) async throws -> (Result, Any) {
        let before = residentBytes()
        let start = ContinuousClock.now
        let loaded = try await TreeLoader.load(from: store, logger: logger)
        let elapsed = ContinuousClock.now - start
        let after = residentBytes()
        let stored = try await store.tree(app: "bench")
        let result = Result(
            snapshotBytes: stored.snapshot?.count ?? 0,
            journalRecords: stored.journal.reduce(0) { $0 + $1.lines.filter { $0 == UInt8(ascii: "\n") }.count },
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            residentBytes: after - before)
        return (result, loaded.processor.trees as Any)
    }

    /// Resident set size of this process, from `/proc/self/statm`.
    public static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
    }
}

/// Nobody delivers in this benchmark.
struct NoOutbox: OutboxListener {
    func outboxChanged() {}
}
