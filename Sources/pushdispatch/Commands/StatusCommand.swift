import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import PushCore
import PushService

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Summarise a running service: queue depth, oldest pending, deliveries, paused applications, ingest position.",
        discussion: """
            Reads GET /status of the service that --config describes (its http.host and http.port), or of \
            --url. Exits 1 when the service cannot be reached.
            """
    )

    @Option(help: "The service's configuration file (its http.host and http.port are used).")
    var config: String?

    @Option(help: "The service's base URL, e.g. http://127.0.0.1:8080 (instead of --config).")
    var url: String?

    @Flag(help: "Print the JSON document instead of the table.")
    var json = false

    func validate() throws {
        if (config == nil) == (url == nil) { throw ValidationError("give --config FILE or --url URL") }
    }

    func run() async throws {
        var base = url ?? ""
        if let config {
            let configuration = try loadConfiguration(config, purpose: .replay)
            var host = configuration.http.host
            if host == "0.0.0.0" { host = "127.0.0.1" } else if host == "::" { host = "::1" }
            base = "http://" + (host.contains(":") ? "[\(host)]" : host) + ":\(configuration.http.port)"
        }
        while base.hasSuffix("/") { base.removeLast() }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let fetched: Result<[UInt8], StatusFailure>
        do {
            let response = try await client.execute(HTTPClientRequest(url: base + "/status"), timeout: .seconds(5))
            if response.status.code == 200 {
                fetched = .success(Array(buffer: try await response.body.collect(upTo: 1 << 20)))
            } else {
                fetched = .failure(StatusFailure("\(base)/status answered \(response.status.code)"))
            }
        } catch {
            fetched = .failure(StatusFailure("cannot reach the service at \(base): \(error)"))
        }
        try? await client.shutdown()
        let body: [UInt8]
        switch fetched {
        case .success(let bytes): body = bytes
        case .failure(let failure):
            printError("pushdispatch: \(failure.message)")
            throw ExitCode(1)
        }
        if json {
            print(String(decoding: body, as: UTF8.self))
            return
        }
        guard let document = try? JSONParser.parse(body) else {
            printError("pushdispatch: \(base)/status did not answer JSON")
            throw ExitCode(1)
        }
        print(StatusTable.render(document), terminator: "")
    }
}

struct StatusFailure: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

/// The operator's table of a `/status` document.
enum StatusTable {
    static func render(_ status: JSON) -> String {
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
