import PushCore
import PushJSON

/// The operator's table of a `/status` document.
public enum StatusTable {
    public static func render(_ status: JSON) -> String {
        var out = ""
        func line(_ text: String = "") { out += text + "\n" }
        func number(_ value: JSON?) -> String {
            switch value {
            case .int(let n)?: String(n)
            case .double(let n)?: String(n)
            default: "-"
            }
        }
        let ready = status["ready"] == .bool(true)
        line("instance    \(status["instance"]?.stringValue ?? "?")   up \(number(status["uptimeSeconds"])) s   \(ready ? "ready" : "NOT READY")")
        let oldest = status["outbox"]?["oldestAgeSeconds"]
        line("outbox      \(number(status["outbox"]?["depth"])) waiting; oldest \(oldest == .null ? "-" : number(oldest) + " s")")
        if case .object(let kinds)? = status["subscriptions"] {
            line("subscribed  " + kinds.map { "\($0.key.string) \(number($0.value))" }.joined(separator: ", "))
        }
        line()
        line("deliveries           last 1 min   last 5 min   last 15 min")
        var keys: Set<String> = []
        for window in ["last1m", "last5m", "last15m"] {
            if case .object(let counts)? = status["deliveries"]?[window] { for (key, _) in counts { keys.insert(key.string) } }
        }
        if keys.isEmpty { line("  (none)") }
        for key in keys.sorted() {
            let cells = ["last1m", "last5m", "last15m"].map { number(status["deliveries"]?[$0]?[key] ?? .int(0)) }
            line("  " + pad(key, 19) + pad(cells[0], 13) + pad(cells[1], 13) + cells[2])
        }
        line()
        let paused = status["paused"]?.arrayValue ?? []
        if paused.isEmpty {
            line("paused      none")
        } else {
            line("paused")
            for item in paused {
                line("  \(item["app"]?.stringValue ?? "?") (\(item["kind"]?.stringValue ?? "?")) for \(number(item["sinceSeconds"])) s: \(item["reason"]?.stringValue ?? "")")
            }
        }
        line()
        let sources = status["ingest"]?.arrayValue ?? []
        let width = max(14, (sources.compactMap { $0["source"]?.stringValue?.count }.max() ?? 0) + 2)
        line("ingest      " + pad("source", width) + "last seq     position")
        if sources.isEmpty { line("  (nothing ingested yet)") }
        for source in sources {
            line("            " + pad(source["source"]?.stringValue ?? "?", width) + pad(number(source["lastSeq"]), 13) + number(source["position"]))
        }
        if case .object(let rejected)? = status["records"]?["rejected"], !rejected.isEmpty {
            line("rejected    " + rejected.map { "\($0.key.string) \(number($0.value))" }.joined(separator: ", "))
        }
        if case .object(let duplicate)? = status["records"]?["duplicate"], !duplicate.isEmpty {
            line("resent      " + duplicate.map { "\($0.key.string) \(number($0.value)) (answered duplicate, not applied again)" }.joined(separator: ", "))
        }
        if let instances = status["instances"]?.arrayValue {
            line()
            line("instances   name          address                heartbeat   owns (inbox: \(number(status["inboxDepth"])) waiting)")
            for instance in instances {
                let owns = (instance["owns"]?.arrayValue ?? []).compactMap(\.stringValue)
                let age = number(instance["heartbeatAgeSeconds"])
                let heartbeat = instance["live"] == .bool(true) ? "\(age) s ago" : "silent \(age) s"
                line(
                    "            " + pad(instance["name"]?.stringValue ?? "?", 14) + pad(instance["address"]?.stringValue ?? "?", 23)
                        + pad(heartbeat, 12) + (owns.isEmpty ? "-" : owns.joined(separator: ", ")))
            }
        }
        return out
    }
}

/// `text` padded with spaces to `width` characters (tables).
public func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}
