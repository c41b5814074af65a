import PushAPI
import PushContracts
import PushCore
import PushDelivery
import PushEngine
import PushJSON
import PushMatching

/// What the operations API (``OperationsAPI``, SPEC §13) acts on in a running service: the
/// store's history, this instance's dispatcher (its paused senders, its feed of attempts), the
/// applications' read rules over the trees the service holds.
struct OperationsConsole: OperationsControl {
    let store: any HistoryStore & DeliveryStore
    let dispatcher: Dispatcher
    /// The applications' senders: their credentials' health.
    let senders: SenderTable
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

    /// This instance's report, taken now (what it publishes with its heartbeat).
    func report(now: Int64) -> JSON {
        DeploymentOverview.report(dispatcher: dispatcher, senders: senders, ingest: operations.ingest, now: now)
    }

    /// This instance's report and, on PostgreSQL, the last of every other live instance.
    func reports(now: Int64) async -> [(instance: String, report: JSON)] {
        var reports = [(instance: operations.instance, report: report(now: now))]
        guard let cluster = operations.cluster, let stored = try? await cluster.instanceReports(within: SharedInstances.staleAfter) else { return reports }
        for (name, bytes) in stored.sorted(by: { $0.key < $1.key }) where name != operations.instance {
            // Written by another instance of this service: still read as any input.
            guard let report = try? JSONParser.parse(bytes), report.objectValue != nil else { continue }
            reports.append((name, report))
        }
        return reports
    }

    /// The overview (SPEC §13.3): the instances, the outbox, the lag behind the database per
    /// application, and per application and provider the last minutes' rates, success,
    /// latency, 429s, sends in flight against the limits, pauses and credentials — of every
    /// live instance on PostgreSQL, merged (``DeploymentOverview``).
    func overview() async -> JSON {
        let now = clock.now
        let status = await operations.status()
        let reports = await reports(now: now)
        let local = reports[0].report
        var instances = status["instances"]?.arrayValue ?? []
        if operations.cluster == nil {
            instances = [
                JSON.members([
                    ("name", .string(operations.instance)), ("role", "single"), ("startedAt", .int(operations.observability.startedAt)),
                    ("heartbeatAgeSeconds", .int(0)), ("live", .bool(true)), ("owns", .array(rules.keys.sorted().map { .string($0) })),
                ])
            ]
        }
        instances = instances.map { entry in
            guard let object = entry.objectValue, let name = entry["name"]?.stringValue else { return entry }
            let sending = reports.first { $0.instance == name }?.report["sending"] ?? .null
            return .object(object.setting(Key("sending"), to: sending))
        }
        return JSON.members([
            ("now", .int(now)),
            ("instance", status["instance"] ?? .null),
            ("uptimeSeconds", status["uptimeSeconds"] ?? .null),
            ("ready", status["ready"] ?? .null),
            ("instances", .array(instances)),
            ("outbox", status["outbox"] ?? .null),
            ("lagMs", DeploymentOverview.lag(reports, now: now)),
            ("sending", local["sending"] ?? .null),
            ("senders", .array(DeploymentOverview.mergedSenders(reports))),
            ("paused", .array(DeploymentOverview.each("paused", of: reports))),
            ("credentials", .array(DeploymentOverview.each("credentials", of: reports))),
            ("subscriptions", status["subscriptions"] ?? .null),
            ("records", status["records"] ?? .null),
            ("history", JSON.members([("on", .bool(historyLimits.isOn)), ("maxAgeMs", .int(historyLimits.maxAge)), ("maxRows", .int(Int64(historyLimits.maxRows)))])),
        ])
    }

    /// The senders paused here and, on PostgreSQL, on the other live instances.
    func pausedSenders() async -> [PausedSender] {
        DeploymentOverview.pausedSenders(DeploymentOverview.each("paused", of: await reports(now: clock.now)))
    }

    /// Resumes the sender here and tells the other instances to resume it too.
    func resume(app: String, kind: SubscriptionKind, destination: String?) async -> Bool {
        let key = SenderKey(app: app, kind: kind, destination: destination)
        var resumed = dispatcher.resume(key)
        if let cluster = operations.cluster {
            let provider = OperationsAPI.providerName(kind)
            let elsewhere = await pausedSenders().contains { $0.app == app && $0.provider == provider && $0.destination == key.destination }
            resumed = resumed || elsewhere
            await cluster.announce(resumed: key)
        }
        return resumed
    }

    /// Queues them again and has this instance's dispatcher claim them at once (on an idle
    /// service it would otherwise wait for the next record or due time).
    func recover(_ filter: RecoveryFilter) async throws -> Int {
        let count = try await history.recover(filter, now: clock.now)
        if count > 0 { dispatcher.outboxChanged() }
        return count
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
            // Its source (the line's digest) had taken it: the same line, redriven just before.
            case .duplicate: result.alreadyRedriven += 1
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
