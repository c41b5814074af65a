import PushAPI
import PushContracts
import PushCore
import PushDelivery
import PushEngine
import PushJSON

/// The overview's figures of one instance (``InstanceReport``), and those of every instance
/// merged (SPEC §13: on PostgreSQL every instance answers for all of them). Each instance
/// publishes its report with its heartbeat (every second); the overview asked of any instance
/// reads the live ones' reports and merges them with its own, taken now.
enum DeploymentOverview {
    /// This instance's part: its senders' rates over the last minutes, its sends in flight
    /// against the limits, its pauses, its credentials, and the newest record `ts` it
    /// processed per application.
    static func report(dispatcher: Dispatcher, senders table: SenderTable, ingest: IngestCounters, now: Int64) -> JSON {
        let load = dispatcher.load
        let paused = dispatcher.paused
        let paces = dispatcher.paces
        let senders: [JSON] = dispatcher.stats.summaries(now: now).sorted { ($0.key.app, $0.key.provider, $0.key.destination ?? "") < ($1.key.app, $1.key.provider, $1.key.destination ?? "") }.map { summary in
            let kind = OperationsAPI.kind(summary.key.provider)
            let key = kind.map { SenderKey(app: summary.key.app, kind: $0, destination: summary.key.destination) }
            let pause = key.flatMap { paused[$0] }
            let pace = key.flatMap { paces[$0] }
            return JSON.members([
                ("app", .string(summary.key.app)), ("provider", .string(summary.key.provider)),
                ("destination", summary.key.destination.map { .string($0) } ?? .null),
                ("perSecond1m", rounded(summary.perSecond1m)), ("perSecond5m", rounded(summary.perSecond5m)),
                ("successRatio", rounded(summary.successRatio)), ("p50Ms", summary.p50.map { .int($0) } ?? .null),
                ("p99Ms", summary.p99.map { .int($0) } ?? .null), ("tooManyRequests5m", .int(Int64(summary.tooManyRequests5m))),
                ("paused", pause.map { JSON.members([("reason", .string($0.reason)), ("since", .int($0.since))]) } ?? .null),
                ("pacing", pace.map(json) ?? .null),
            ])
        }
        let pausedList: [JSON] = paused.sorted { $0.key < $1.key }.map { key, pause in
            OperationsAPI.json(
                PausedSender(
                    app: key.app, provider: OperationsAPI.providerName(key.kind), destination: key.destination, reason: String(pause.reason.prefix(300)),
                    since: pause.since, probeAt: pause.probeAt))
        }
        let credentials: [JSON] = table.credentials(now: now).map { health in
            var health = health
            if let kind = OperationsAPI.kind(health.provider.rawValue), paused[SenderKey(app: health.app, kind: kind, destination: nil)] != nil {
                health.state = .refused
            }
            return json(health)
        }
        let providers: [(String, JSON)] = load.byProvider.sorted { $0.key.rawValue < $1.key.rawValue }.map { ($0.key.rawValue, .int(Int64($0.value))) }
        let apps: [(String, JSON)] = load.byApp.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) }
        return JSON.members([
            ("senders", .array(senders)),
            ("sending", JSON.members([
                ("inFlight", .int(Int64(load.inFlight))), ("maximumInFlight", .int(Int64(load.limits.maximumInFlight))),
                ("perProviderLimit", .int(Int64(load.limits.perProvider))), ("perAppLimit", .int(Int64(load.limits.perApp))),
                ("byProvider", JSON.members(providers)), ("byApp", JSON.members(apps)),
            ])),
            ("paused", .array(pausedList)),
            ("credentials", .array(credentials)),
            ("newestTs", JSON.members(ingest.newestTimestamp.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
        ])
    }

    /// The report as written with the heartbeat: at most ``InstanceReport/maximumBytes`` (a
    /// deployment with thousands of webhooks keeps its sending figures and pauses only).
    static func bytes(_ report: JSON) -> [UInt8] {
        var writer = JSONWriter()
        writer.write(report)
        if writer.bytes.count <= InstanceReport.maximumBytes { return writer.bytes }
        var short = JSONWriter()
        short.write(JSON.members([("sending", report["sending"] ?? .null), ("paused", report["paused"] ?? .array([])), ("truncated", .bool(true))]))
        return short.bytes.count <= InstanceReport.maximumBytes ? short.bytes : Array(#"{"truncated":true}"#.utf8)
    }

    /// A paced sender's figures: this instance's share of the budget, its rate now (lower
    /// after quota answers), the quota answers (429) it got and the sends that waited for it.
    static func json(_ pace: SendPace) -> JSON {
        JSON.members([
            ("budgetPerSecond", rounded(pace.policy.perSecond)), ("perSecond", rounded(pace.rate)), ("refusals", .int(Int64(pace.refusals))),
            ("waited", .int(Int64(pace.waited))),
        ])
    }

    static func json(_ health: CredentialHealth) -> JSON {
        func time(_ value: Int64?) -> JSON { value.map { .int($0) } ?? .null }
        return JSON.members([
            ("app", .string(health.app)), ("provider", .string(health.provider.rawValue)), ("mechanism", .string(health.mechanism)),
            ("identity", .string(health.identity)), ("state", .string(health.state.rawValue)), ("issuedAt", time(health.issuedAt)),
            ("expiresAt", time(health.expiresAt)), ("renewsAt", time(health.renewsAt)),
            ("failure", health.failure.map { JSON.members([("at", time(health.failedAt)), ("reason", .string($0))]) } ?? .null),
            ("origins", health.origins.map { .int(Int64($0)) } ?? .null),
        ])
    }

    static func rounded(_ value: Double?) -> JSON {
        guard let value, value.isFinite else { return .null }
        return .double((value * 1_000).rounded() / 1_000)
    }

    static func number(_ value: JSON?) -> Double? {
        switch value {
        case .double(let number)?: number.isFinite ? number : nil
        case .int(let number)?: Double(number)
        default: nil
        }
    }

    /// The senders of every instance as one list, by application, provider and destination:
    /// rates and 429s summed, the success ratio weighted by each instance's attempts, p50 and
    /// p99 the highest of the instances' (the slowest instance's: percentiles do not add up),
    /// a pause from the first instance paused, and which instances sent.
    static func mergedSenders(_ reports: [(instance: String, report: JSON)]) -> [JSON] {
        struct Row {
            var app: String
            var provider: String
            var destination: String?
            var perSecond1m = 0.0
            var perSecond5m = 0.0
            var delivered = 0.0
            var weight = 0.0
            var p50: Int64?
            var p99: Int64?
            var tooManyRequests: Int64 = 0
            var paused: JSON = .null
            var instances: [String] = []
            /// Summed over the instances: their shares of the budget, their rates now, their
            /// quota answers and sends that waited.
            var pacing: (budget: Double, rate: Double, refusals: Int64, waited: Int64)?
        }
        var rows: [String: Row] = [:]
        for (instance, report) in reports {
            for sender in report["senders"]?.arrayValue ?? [] {
                guard let app = sender["app"]?.stringValue, let provider = sender["provider"]?.stringValue else { continue }
                let destination = sender["destination"]?.stringValue
                let key = [app, provider, destination ?? ""].joined(separator: "\u{0}")
                var row = rows[key] ?? Row(app: app, provider: provider, destination: destination)
                let five = max(0, number(sender["perSecond5m"]) ?? 0)
                row.perSecond1m += max(0, number(sender["perSecond1m"]) ?? 0)
                row.perSecond5m += five
                if let success = number(sender["successRatio"]), five > 0 {
                    row.delivered += min(1, max(0, success)) * five
                    row.weight += five
                }
                if let p50 = sender["p50Ms"]?.integerValue { row.p50 = max(row.p50 ?? p50, p50) }
                if let p99 = sender["p99Ms"]?.integerValue { row.p99 = max(row.p99 ?? p99, p99) }
                row.tooManyRequests = row.tooManyRequests.saturatingAdding(max(0, sender["tooManyRequests5m"]?.integerValue ?? 0))
                if row.paused.isNull, let pause = sender["paused"]?.objectValue {
                    row.paused = .object(pause.setting(Key("instance"), to: .string(instance)))
                }
                if let pacing = sender["pacing"], !pacing.isNull {
                    var sum = row.pacing ?? (0, 0, 0, 0)
                    sum.budget += max(0, number(pacing["budgetPerSecond"]) ?? 0)
                    sum.rate += max(0, number(pacing["perSecond"]) ?? 0)
                    sum.refusals = sum.refusals.saturatingAdding(max(0, pacing["refusals"]?.integerValue ?? 0))
                    sum.waited = sum.waited.saturatingAdding(max(0, pacing["waited"]?.integerValue ?? 0))
                    row.pacing = sum
                }
                row.instances.append(instance)
                rows[key] = row
            }
        }
        return rows.sorted { $0.key < $1.key }.map { _, row in
            JSON.members([
                ("app", .string(row.app)), ("provider", .string(row.provider)), ("destination", row.destination.map { .string($0) } ?? .null),
                ("perSecond1m", rounded(row.perSecond1m)), ("perSecond5m", rounded(row.perSecond5m)),
                ("successRatio", row.weight > 0 ? rounded(row.delivered / row.weight) : .null),
                ("p50Ms", row.p50.map { .int($0) } ?? .null), ("p99Ms", row.p99.map { .int($0) } ?? .null),
                ("tooManyRequests5m", .int(row.tooManyRequests)), ("paused", row.paused),
                ("pacing", row.pacing.map { pacing in
                    JSON.members([
                        ("budgetPerSecond", rounded(pacing.budget)), ("perSecond", rounded(pacing.rate)), ("refusals", .int(pacing.refusals)),
                        ("waited", .int(pacing.waited)),
                    ])
                } ?? .null),
                ("instances", .array(row.instances.map { .string($0) })),
            ])
        }
    }

    /// Each instance's entries of `list` (`paused`, `credentials`), marked with its name.
    static func each(_ list: String, of reports: [(instance: String, report: JSON)]) -> [JSON] {
        reports.flatMap { instance, report in
            (report[list]?.arrayValue ?? []).compactMap { entry in entry.objectValue.map { .object($0.setting(Key("instance"), to: .string(instance))) } }
        }
    }

    /// The lag behind the database per application: now minus the newest record `ts` any
    /// instance processed.
    static func lag(_ reports: [(instance: String, report: JSON)], now: Int64) -> JSON {
        var newest: [String: Int64] = [:]
        for (_, report) in reports {
            for (key, value) in report["newestTs"]?.objectValue ?? JSONObject() {
                guard let ts = value.integerValue else { continue }
                newest[key.string] = max(newest[key.string] ?? ts, ts)
            }
        }
        return JSON.members(newest.sorted { $0.key < $1.key }.map { ($0.key, .int(max(0, now.saturatingSubtracting($0.value)))) })
    }

    /// The paused senders of a report (what `GET /ops/v1/senders` lists).
    static func pausedSenders(_ entries: [JSON]) -> [PausedSender] {
        entries.compactMap { entry in
            guard let app = entry["app"]?.stringValue, let provider = entry["provider"]?.stringValue, let reason = entry["reason"]?.stringValue,
                let since = entry["since"]?.integerValue, let probeAt = entry["probeAt"]?.integerValue
            else { return nil }
            return PausedSender(
                app: app, provider: provider, destination: entry["destination"]?.stringValue, reason: reason, since: since, probeAt: probeAt,
                instance: entry["instance"]?.stringValue)
        }
    }
}
