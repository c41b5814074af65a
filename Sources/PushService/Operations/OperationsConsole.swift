import PushAPI
import PushContracts
import PushCore
import PushDelivery
import PushJSON
import PushMatching

/// What the operations API (``OperationsAPI``, SPEC §13) acts on in a running service: the
/// store's history, this instance's dispatcher (its paused senders, its feed of attempts), the
/// applications' read rules over the trees the service holds.
struct OperationsConsole: OperationsControl {
    let store: any HistoryStore & DeliveryStore
    let dispatcher: Dispatcher
    let operations: Operations
    /// Each application's read rules in force.
    let rules: [String: ReadRules]
    let trees: any TreeSource
    let clock: any ServiceClock
    let historyLimits: HistoryLimits
    /// `ingest.deadLetter`.
    let deadLetterPath: String
    /// `ingest.queueFile` (a too-long line is read again from it), `ingest.maxRecordBytes`.
    let queueFile: String?
    let maxRecordBytes: Int
    /// Where redriven lines go: the sources' queue, as a line read from a source of its own.
    let queue: IngestQueue
    /// The sources' checkpoints: a redriven line leaves one (`redrive/<digest>`), so it is
    /// applied once.
    let checkpoints: any IngestStore

    var history: any HistoryStore { store }
    var now: Int64 { clock.now }

    /// The overview (SPEC §13.3): this instance and the others, the outbox, the lag behind
    /// the database per application, and per application and provider the last minutes'
    /// rates, success, latency, 429s, sends in flight against the limits, and pauses.
    func overview() async -> JSON {
        let now = clock.now
        let status = await operations.status()
        let load = dispatcher.load
        let paused = dispatcher.paused
        func number(_ value: Double?) -> JSON { value.map { .double(($0 * 1_000).rounded() / 1_000) } ?? .null }
        let senders: [JSON] = dispatcher.stats.summaries(now: now).map { summary in
            let kind = OperationsAPI.kind(summary.key.provider)
            let pause = kind.flatMap { paused[SenderKey(app: summary.key.app, kind: $0, destination: summary.key.destination)] }
            return JSON.members([
                ("app", .string(summary.key.app)), ("provider", .string(summary.key.provider)),
                ("destination", summary.key.destination.map { .string($0) } ?? .null),
                ("perSecond1m", number(summary.perSecond1m)), ("perSecond5m", number(summary.perSecond5m)),
                ("successRatio", number(summary.successRatio)), ("p50Ms", summary.p50.map { .int($0) } ?? .null),
                ("p99Ms", summary.p99.map { .int($0) } ?? .null), ("tooManyRequests5m", .int(Int64(summary.tooManyRequests5m))),
                ("paused", pause.map { JSON.members([("reason", .string($0.reason)), ("since", .int($0.since))]) } ?? .null),
            ])
        }
        let lag: [(String, JSON)] = operations.ingest.newestTimestamp.sorted { $0.key < $1.key }.map { app, ts in
            (app, .int(max(0, now.saturatingSubtracting(ts))))
        }
        let providers: [(String, JSON)] = load.byProvider.sorted { $0.key.rawValue < $1.key.rawValue }.map { ($0.key.rawValue, .int(Int64($0.value))) }
        let apps: [(String, JSON)] = load.byApp.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) }
        return JSON.members([
            ("now", .int(now)),
            ("instance", status["instance"] ?? .null),
            ("uptimeSeconds", status["uptimeSeconds"] ?? .null),
            ("ready", status["ready"] ?? .null),
            ("instances", status["instances"] ?? .array([])),
            ("outbox", status["outbox"] ?? .null),
            ("lagMs", JSON.members(lag)),
            ("sending", JSON.members([
                ("inFlight", .int(Int64(load.inFlight))), ("maximumInFlight", .int(Int64(load.limits.maximumInFlight))),
                ("perProviderLimit", .int(Int64(load.limits.perProvider))), ("perAppLimit", .int(Int64(load.limits.perApp))),
                ("byProvider", JSON.members(providers)), ("byApp", JSON.members(apps)),
            ])),
            ("senders", .array(senders)),
            ("paused", .array(pausedSenders().map(OperationsAPI.json))),
            ("subscriptions", status["subscriptions"] ?? .null),
            ("records", status["records"] ?? .null),
            ("history", JSON.members([("on", .bool(historyLimits.isOn)), ("maxAgeMs", .int(historyLimits.maxAge)), ("maxRows", .int(Int64(historyLimits.maxRows)))])),
        ])
    }

    func pausedSenders() -> [PausedSender] {
        dispatcher.paused.sorted { $0.key < $1.key }.map { key, pause in
            PausedSender(
                app: key.app, provider: OperationsAPI.providerName(key.kind), destination: key.destination, reason: pause.reason, since: pause.since,
                probeAt: pause.probeAt)
        }
    }

    func resume(app: String, kind: SubscriptionKind, destination: String?) -> Bool {
        dispatcher.resume(SenderKey(app: app, kind: kind, destination: destination))
    }

    func deadLetters(_ filter: DeadLetterFilter, cursor: Int64?, limit: Int) async throws -> HistoryPage<DeadLetterEntry> {
        let reader = DeadLetterReader(path: deadLetterPath)
        return try await Task.detached { try reader.page(filter, cursor: cursor, limit: limit) }.value
    }

    func redrive(_ filter: DeadLetterFilter, dryRun: Bool) async throws -> RedriveResult {
        let reader = DeadLetterReader(path: deadLetterPath)
        let (queueFile, limit) = (self.queueFile, maxRecordBytes)
        let redriven = Set(try await checkpoints.checkpoints().compactMap { checkpoint -> String? in
            guard let range = checkpoint.source.range(of: "redrive/") else { return nil }
            return String(checkpoint.source[range.upperBound...])
        })
        var result = RedriveResult()
        // The letters a page at a time (a dead-letter file may hold a gigabyte), each with its
        // whole line where it can be had again.
        var cursor: Int64?
        repeat {
            let after = cursor
            let (letters, more) = try await Task.detached { () throws -> ([(DeadLetterEntry, [UInt8])], Bool) in
                var letters: [(DeadLetterEntry, [UInt8])] = []
                let more = try reader.each(filter, cursor: after) { entry, line in
                    guard letters.count < Self.redrivePage else { return false }
                    var whole = line
                    if entry.source == "queue-file", let queueFile,
                        let again = DeadLetterReader.wholeLine(queueFile: queueFile, position: entry.position, kept: line, limit: limit)
                    {
                        whole = again
                    }
                    letters.append((entry, whole))
                    return true
                }
                return (letters, more)
            }.value
            try await redrive(letters, redriven: redriven, dryRun: dryRun, into: &result)
            cursor = more ? letters.last?.0.index : nil
        } while cursor != nil
        return result
    }

    /// Letters read at once by a redrive.
    static let redrivePage = 256

    func redrive(_ letters: [(DeadLetterEntry, [UInt8])], redriven: Set<String>, dryRun: Bool, into result: inout RedriveResult) async throws {
        for (entry, line) in letters {
            let digest = Self.digest(line)
            if redriven.contains(digest) {
                result.alreadyRedriven += 1
                continue
            }
            // Refused for its place in the source's order: a resend, or out of order. Never
            // applied again.
            if entry.reason.hasPrefix("seq "), entry.reason.contains("last accepted") || entry.reason.contains("accepted already") {
                result.notRedrivable += 1
                continue
            }
            guard line.count <= maxRecordBytes, (try? ChangeRecord.parse(line)) != nil else {
                result.refused += 1
                continue
            }
            if dryRun {
                result.applied += 1
                continue
            }
            // A source of its own per letter: its order is no source's, and its checkpoint says
            // it was applied (a second redrive refuses it as a repeat).
            let ack = IngestAck()
            guard await queue.send(IngestLine(bytes: line, source: "redrive/" + digest, position: entry.position, ack: ack)) else {
                throw RequestError(.notConfigured, "the service is stopping: nothing more is taken in")
            }
            switch await ack.result() {
            case .accepted: result.applied += 1
            case .rejected: result.refused += 1
            }
        }
    }

    /// The first 12 hex digits of a line's SHA-256 (as a device token's are shown): its redrive
    /// source's name.
    static func digest(_ line: [UInt8]) -> String {
        OperationsAPI.redacted(String(decoding: line, as: UTF8.self))["sha256"]?.stringValue ?? ""
    }

    func watch() -> AsyncStream<DeliveryAttempt> {
        dispatcher.feed.watch()
    }

    func simulate(app: String, path text: String, auth: JSON) async throws -> JSON {
        let path: Path
        do {
            path = try Path(text)
        } catch {
            throw RequestError(.invalid, "path: \(error)")
        }
        guard let rules = rules[app] else { throw RequestError(.invalid, "app: \(JSONWriter.quoted(app)) is not a configured application") }
        let tree = rules.readsData ? try await trees.tree(app: app) : DataTree()
        let decision = rules.evaluate(path: path, auth: auth.isNull ? nil : auth, tree: tree, now: clock.now)
        let trace: [JSON] = decision.trace.map { step in
            let outcome: JSON =
                switch step.outcome {
                case .granted: "granted"
                case .denied: "denied"
                case .failed(let message): .string("error: " + message)
                }
            return .object(JSONObject([(Key("rule"), .string(step.rule)), (Key("path"), .string(step.path.string)), (Key("outcome"), outcome)]))
        }
        return .object(
            JSONObject([
                (Key("allowed"), .bool(decision.allowed)), (Key("grantedBy"), decision.grantedBy.map { .string($0) } ?? .null),
                (Key("reads"), .array(decision.reads.map { .string($0.string) })), (Key("trace"), .array(trace)),
            ]))
    }
}
