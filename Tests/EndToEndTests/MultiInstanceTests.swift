import Foundation
import PushCore
import PushJSON
import PushJOSE
import PushFakes
import PushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Three `pushdispatch` processes on one PostgreSQL database and the fake providers: the REST
/// API on each, records fed to two of them, one killed with SIGKILL in the middle of the
/// stream; its applications are taken over within 10 s and every notification is delivered,
/// in order per subscription, duplicated only when it was in flight at the kill.
@Suite("Several instances on PostgreSQL, as processes", .processLevel, .serialized, .enabled(if: PostgresTestServer.enabled))
struct MultiInstanceTests {
    /// Each application its own secret (one key for two would let a token act on both).
    static func secret(_ app: String) -> String { "multi-instance-secret-of-32-bytes-for-\(app)" }

    static func token(_ app: String) throws -> String {
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret(app).utf8)))])
        let claims: JSON = ["sub": "alice", "exp": .int(Int64(Date().timeIntervalSince1970) + 600)]
        return String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(Array(claims.description.utf8)), as: UTF8.self)
    }
    static let webhookSecret = ServiceEndToEndTests.webhookSecret
    static let apps = (1...6).map { "app\($0)" }
    static let records = 60

    static func config(_ folder: URL, instance: String, database: String, fakes: FakeProviders, port: Int = 0) -> String {
        var text = """
            store: {postgres: "\(database)"}
            instance: {name: \(instance)}
            ingest: {queueFile: ./changes.ndjson, socket: ./pushdispatch.sock, deadLetter: ./dead.ndjson}
            http: {port: \(port)}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 60s}
            apps:

            """
        for app in apps {
            text += """
                  \(app):
                    auth: {hs256Secret: "\(secret(app))"}
                    webhooks: {orders: {url: "\(fakes.webhookURL("orders"))", secret: "\(webhookSecret)"}}

                """
        }
        return text
    }

    static func subscribe(_ port: Int, app: String) throws -> String {
        let reply = try RunCommandTests.curl([
            "-X", "POST", "http://127.0.0.1:\(port)/datasync/v2/\(app)/subscriptions/alice",
            "-H", "Authorization: Bearer \(try Self.token(app))", "-H", "Content-Type: application/json",
            "--data", #"{"kind":"webhook","mode":"childEvent","path":"/b","destination":"orders","context":"ctx-\#(app)"}"#,
        ])
        guard reply.status == 201, let id = try JSONParser.parse(Array(reply.body.utf8))["id"]?.stringValue else {
            throw RunningService.ServiceError(message: "POST answered \(reply.status): \(reply.body)")
        }
        return id
    }

    /// The record numbers each subscription received (200 answers), in arrival order.
    static func delivered(_ fakes: FakeProviders) throws -> [String: [Int]] {
        var numbers: [String: [Int]] = [:]
        for request in fakes.received(provider: "webhook") where request.status == 200 {
            let body = try JSONParser.parse(request.data)
            guard let subscription = body["subscription"]?.stringValue, let added = body["event"]?["c"]?["a"]?.objectValue else { continue }
            for key in added.keys { numbers[subscription, default: []].append(Int(key.string.dropFirst()) ?? -1) }
        }
        return numbers
    }

    static func record(_ app: String, _ n: Int, _ index: Int) -> String {
        #"{"seq":\#(n * 10 + index),"app":"\#(app)","op":"patch","path":"/b","data":{"n\#(n)":\#(n)}}"#
    }

    /// Who holds which application now (live leases), as psql reads the table.
    static func owners(_ server: PostgresTestServer, _ database: String) throws -> [String: String] {
        let name = String(database.split(separator: "/").last!)
        let output = try server.psql(
            name, "SELECT app || '=' || owner FROM app_lease WHERE expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
        var owners: [String: String] = [:]
        for line in output.text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { owners[parts[0]] = parts[1] }
        }
        return owners
    }

    /// Waits until every subscription received records 1...`records`; past `timeout`, records
    /// what each received, the outbox, the leases and the logs, and throws.
    static func waitForEveryNotification(
        _ fakes: FakeProviders, subscriptions: [String: String], records: Int, server: PostgresTestServer, database: String, logs: [String],
        timeout: Double = 90
    ) async throws {
        do {
            try await ServiceEndToEndTests.eventually("every notification delivered", timeout: timeout) {
                let numbers = try Self.delivered(fakes)
                return subscriptions.values.allSatisfy { Set(numbers[$0] ?? []).count == records }
            }
        } catch {
            let numbers = try Self.delivered(fakes)
            let name = String(database.split(separator: "/").last!)
            Issue.record(
                """
                \(error): \(subscriptions.sorted { $0.key < $1.key }.map { "\($0.key): \(numbers[$0.value] ?? [])" }.joined(separator: "\n"))
                inbox: \(try server.psql(name, "SELECT app, count(*) FROM inbox GROUP BY app").text)
                outbox: \(try server.psql(name, "SELECT app, count(*), min(claimed_by), max(attempts) FROM notification GROUP BY app").text)
                leases: \(try server.psql(name, "SELECT * FROM app_lease").text)
                logs: \(logs.map { $0.suffix(3000) }.joined(separator: "\n----\n"))
                """)
            throw error
        }
    }

    /// The oracle: every subscription received records 1...`records`, in order; a record
    /// received again only right after itself (a send in flight when its instance was lost,
    /// sent again by the instance that took its claim over). Returns the number of repeats.
    static func expectEveryNotificationInOrder(_ fakes: FakeProviders, subscriptions: [String: String], records: Int) throws -> Int {
        let numbers = try Self.delivered(fakes)
        var repeats = 0
        for (app, id) in subscriptions.sorted(by: { $0.key < $1.key }) {
            let received = numbers[id] ?? []
            var distinct: [Int] = []
            for number in received {
                if distinct.last == number { repeats += 1 } else { distinct.append(number) }
            }
            #expect(distinct == Array(1...records), "\(app): \(received)")
        }
        return repeats
    }

    @Test("three instances, SIGKILL of one mid-stream: takeover within 10 s, every notification delivered in order")
    func threeInstancesAndAKill() async throws {
        let server = try PostgresTestServer.shared.get()
        let database = try server.createDatabase()
        let fakes = try await FakeProviders.start(tls: true, webhooks: ["orders": Self.webhookSecret])
        defer { Task { await fakes.stop() } }
        var folders: [URL] = []
        var services: [RunningService] = []
        for index in 1...3 {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-multi-\(UUID().uuidString.prefix(8))-\(index)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(Self.config(folder, instance: "node-\(index)", database: database, fakes: fakes).utf8)
                .write(to: folder.appendingPathComponent("pushdispatch.yaml"))
            #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil))
            folders.append(folder)
            services.append(try RunningService(config: folder.appendingPathComponent("pushdispatch.yaml").path))
        }
        defer { for service in services where service.process.isRunning { _ = service.stop() } }
        var ports: [Int] = []
        for service in services { ports.append(try await service.port()) }
        for port in ports {
            try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
        }
        // The applications are shared out: two each once the three see each other.
        try await ServiceEndToEndTests.eventually("every application owned, two per instance", timeout: 30) {
            let owners = try Self.owners(server, database)
            return owners.count == 6 && Dictionary(grouping: owners.values, by: { $0 }).values.allSatisfy { $0.count == 2 }
        }
        // One service key, whichever instance started first.
        #expect(try server.psql(String(database.split(separator: "/").last!), "SELECT count(*) FROM service_key").text.trimmingCharacters(in: .whitespacesAndNewlines) == "1")

        // Subscriptions through different instances; each is read back through another.
        var subscriptions: [String: String] = [:]
        for (index, app) in Self.apps.enumerated() {
            subscriptions[app] = try Self.subscribe(ports[index % 3], app: app)
            let read = try RunCommandTests.curl([
                "http://127.0.0.1:\(ports[(index + 1) % 3])/datasync/v2/\(app)/subscriptions/alice/\(subscriptions[app]!)",
                "-H", "Authorization: Bearer \(try Self.token(app))",
            ])
            #expect(read.status == 200)
        }

        // The stream: each application's records through one queue file, of node-1 or node-3
        // (node-2, to be killed, only processes and delivers).
        // (seq increases through each file: record n of application i has seq 10 n + i.)
        func feed(_ range: ClosedRange<Int>) throws {
            var files: [Int: [String]] = [:]
            for n in range {
                for (index, app) in Self.apps.enumerated() { files[index % 2 == 0 ? 0 : 2, default: []].append(Self.record(app, n, index)) }
            }
            for (file, lines) in files { try CrashTests.append(lines[...], to: folders[file]) }
        }
        try feed(1...(Self.records / 2))
        try await ServiceEndToEndTests.eventually("deliveries under way") { fakes.received(provider: "webhook").count >= 20 }

        let victim = "node-2"
        let held = try Self.owners(server, database).filter { $0.value == victim }.map(\.key)
        #expect(held.count == 2)
        let before = try Self.delivered(fakes).mapValues { Set($0).count }
        kill(services[1].process.processIdentifier, SIGKILL)
        services[1].process.waitUntilExit()
        let killed = Date()
        try feed((Self.records / 2 + 1)...Self.records)
        // Every subscription delivers again within 10 s, those whose head notification the dead
        // instance had claimed included (its claims go with its leases).
        try await ServiceEndToEndTests.eventually("every subscription delivering again", timeout: 10) {
            let now = try Self.delivered(fakes).mapValues { Set($0).count }
            return subscriptions.values.allSatisfy { (now[$0] ?? 0) > (before[$0] ?? 0) }
        }
        print("every subscription delivering again after SIGKILL: \(String(format: "%.2f", Date().timeIntervalSince(killed))) s")

        try await ServiceEndToEndTests.eventually("node-2's applications taken over", timeout: 30) {
            let owners = try Self.owners(server, database)
            return owners.count == 6 && !owners.values.contains(victim)
        }
        let takeover = Date().timeIntervalSince(killed)
        print("takeover after SIGKILL: \(String(format: "%.2f", takeover)) s")
        #expect(takeover <= 10, "taken over after \(takeover) s")

        try await Self.waitForEveryNotification(
            fakes, subscriptions: subscriptions, records: Self.records, server: server, database: database, logs: services.map { $0.log.withLock { $0 } })
        // In order per subscription; a repeat only right after itself (a send in flight at the
        // kill, sent again by the instance that took the claim over).
        let repeats = try Self.expectEveryNotificationInOrder(fakes, subscriptions: subscriptions, records: Self.records)
        // A subscription has one notification in flight at most: one repeat each at most.
        #expect(repeats <= subscriptions.count, "repeats: \(repeats)")
        print("repeats after the kill: \(repeats)")
        // The delivery history is the shared one: each subscription's attempts, whichever
        // instance made them, read through either instance still running (SPEC §13.2). An
        // attempt is written with its settlement, which may come a little after the provider's
        // answer (an idle dispatcher's answers wait up to `settleLinger` for the next claim):
        // read until the last ones are in, then through both.
        func delivered(_ port: Int, _ app: String, _ id: String) throws -> Int {
            let reply = try RunCommandTests.curl(["http://127.0.0.1:\(port)/ops/v1/subscriptions/\(app)/\(id)/history?limit=500"])
            let items = try JSONParser.parse(Array(reply.body.utf8))["items"]?.arrayValue ?? []
            return items.filter { $0["outcome"]?.stringValue == "delivered" }.count
        }
        for (app, id) in subscriptions.sorted(by: { $0.key < $1.key }) {
            try? await ServiceEndToEndTests.eventually("\(app)'s attempts settled", timeout: 10) {
                let counts = try [ports[0], ports[2]].map { try delivered($0, app, id) }
                return counts[0] == counts[1] && counts[0] >= Self.records
            }
            let counts = try [ports[0], ports[2]].map { try delivered($0, app, id) }
            #expect(counts[0] == counts[1] && counts[0] >= Self.records, "\(app): delivered attempts read through node-1 and node-3: \(counts)")
        }
        // The overview asked of either instance tells of both (SPEC §13): the instances with
        // their sends in flight, and the senders of every live instance merged.
        var seen: [Set<String>] = []
        for port in [ports[0], ports[2]] {
            let reply = try RunCommandTests.curl(["http://127.0.0.1:\(port)/ops/v1/overview"])
            let overview = try JSONParser.parse(Array(reply.body.utf8))
            let live = (overview["instances"]?.arrayValue ?? []).filter { $0["live"]?.boolValue == true }
            #expect(Set(live.compactMap { $0["name"]?.stringValue }) == ["node-1", "node-3"], "\(overview)")
            #expect(live.allSatisfy { $0["sending"]?["inFlight"]?.integerValue != nil && $0["startedAt"]?.integerValue != nil }, "\(overview)")
            let webhooks = (overview["senders"]?.arrayValue ?? []).filter { $0["provider"]?.stringValue == "webhook" }
            #expect(webhooks.count == Self.apps.count, "\(overview)")
            seen.append(Set(webhooks.flatMap { $0["instances"]?.arrayValue?.compactMap(\.stringValue) ?? [] }))
        }
        #expect(seen[0] == seen[1] && seen[0] == ["node-1", "node-3"], "both delivered, both are counted, through either: \(seen)")
        // A graceful stop hands the applications over at once (no waiting for the leases to expire).
        #expect(services[2].stop() == 0)
        let stopped = Date()
        try await ServiceEndToEndTests.eventually("node-3's applications handed to node-1", timeout: 30) {
            let owners = try Self.owners(server, database)
            return owners.count == 6 && owners.values.allSatisfy { $0 == "node-1" }
        }
        let handover = Date().timeIntervalSince(stopped)
        print("handover after SIGTERM: \(String(format: "%.2f", handover)) s")
        #expect(handover <= 3, "handed over after \(handover) s")
        #expect(services[0].stop() == 0)
    }

    @Test("instances started without a name get one each; a record resent to another instance after a lost ack is answered duplicate and applied once")
    func unnamedInstancesAndResends() async throws {
        let server = try PostgresTestServer.shared.get()
        let database = try server.createDatabase()
        var folders: [URL] = []
        var services: [RunningService] = []
        for index in 1...2 {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-unnamed-\(UUID().uuidString.prefix(8))-\(index)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let config = """
                store: {postgres: "\(database)"}
                ingest: {socket: ./in.sock, deadLetter: ./dead.ndjson}
                http: {port: 0}
                apps: {app1: {auth: {hs256Secret: "\(Self.secret("app1"))"}}}
                """
            try Data(config.utf8).write(to: folder.appendingPathComponent("pushdispatch.yaml"))
            var letter = JSONWriter()
            if index == 1 {
                // A line an earlier version refused by a defect since fixed, sent twice by its
                // client (refused twice): redriven below.
                letter.write([
                    "ts": .int(Int64(Date().timeIntervalSince1970 * 1000) - 60_000), "source": "socket", "position": 0,
                    "reason": "path: an earlier version refused it by a defect",
                    "line": .string(#"{"seq":90,"app":"app1","op":"put","path":"/redriven","data":true}"#),
                ])
                let text = String(decoding: letter.bytes, as: UTF8.self) + "\n"
                try Data((text + text).utf8).write(to: folder.appendingPathComponent("dead.ndjson"))
            } else {
                // A resend an earlier version refused (today it is answered duplicate): never redriven.
                letter.write([
                    "ts": .int(Int64(Date().timeIntervalSince1970 * 1000) - 60_000), "source": "socket", "position": 1,
                    "reason": "seq 1 was accepted already from this source (through another instance; last accepted 1): a resend is not applied twice",
                    "line": .string(#"{"seq":1,"app":"app1","op":"put","path":"/n","data":1}"#),
                ])
                try Data((String(decoding: letter.bytes, as: UTF8.self) + "\n").utf8).write(to: folder.appendingPathComponent("dead.ndjson"))
            }
            folders.append(folder)
            services.append(try RunningService(config: folder.appendingPathComponent("pushdispatch.yaml").path))
        }
        defer { for service in services where service.process.isRunning { _ = service.stop() } }
        for service in services { _ = try await service.port() }
        let name = String(database.split(separator: "/").last!)
        try await ServiceEndToEndTests.eventually("two instances, two names") {
            try server.psql(name, "SELECT count(DISTINCT name) FROM instance").text.trimmingCharacters(in: .whitespacesAndNewlines) == "2"
        }
        func send(_ folder: URL, _ seqs: ClosedRange<Int>) throws -> [String] {
            // Closed by its deinit (a second close could hit a descriptor reused meanwhile).
            let client = try SocketClient(path: folder.appendingPathComponent("in.sock").path)
            client.send(seqs.map { #"{"seq":\#($0),"app":"app1","op":"put","path":"/n","data":\#($0)}"# + "\n" }.joined())
            return client.answers(seqs.count, timeout: 30)
        }
        let ports = try await [services[0].port(), services[1].port()]
        // 1 to 5 through the first; its acks of 3 to 5 are "lost": the client sends 3 to 8 to the
        // second, which answers what the first committed as duplicates, with the watermark.
        #expect(try send(folders[0], 1...5) == (1...5).map { #"{"seq":\#($0),"ok":true}"# })
        let resent = try send(folders[1], 3...8)
        #expect(resent == (3...5).map { #"{"seq":\#($0),"ok":true,"duplicate":true,"watermark":5}"# } + (6...8).map { #"{"seq":\#($0),"ok":true}"# })
        let metrics = try RunCommandTests.curl(["http://127.0.0.1:\(ports[1])/metrics"]).body
        #expect(ProviderDownTests.metric(metrics, #"pushdispatch_records_duplicate_total{source="socket"}"#) == 3, "\(metrics.split(separator: "\n").filter { $0.contains("records_") })")
        // Not dead-lettered: the second instance's file holds only the earlier version's letter.
        #expect(try String(contentsOf: folders[1].appendingPathComponent("dead.ndjson"), encoding: .utf8).split(separator: "\n").count == 1)
        // Applied once each: the tree's journal holds 8 records (the inbox is drained into it).
        try await ServiceEndToEndTests.eventually("8 records journalled, none waiting") {
            let counts = try server.psql(
                name,
                #"SELECT (SELECT count(*) FROM inbox) || '/' || (SELECT coalesce(sum(array_length(regexp_split_to_array(convert_from(records, 'UTF8'), '"seq":'), 1) - 1), 0) FROM tree_journal)"#
            ).text
            return counts.trimmingCharacters(in: .whitespacesAndNewlines) == "0/8"
        }
        // Redrive on a shared deployment: each instance's own dead letters; the one valid now goes
        // through the shared inbox to the application's owner, once (its copy is answered
        // duplicate: redriven before); the second instance's letter was refused for its seq and is
        // never applied again.
        func redrive(_ port: Int) throws -> JSON {
            let reply = try RunCommandTests.curl(["-X", "POST", "-H", "Content-Type: application/json", "--data", "{}", "http://127.0.0.1:\(port)/ops/v1/deadletter/redrive"])
            return try JSONParser.parse(Array(reply.body.utf8))
        }
        let first = try redrive(ports[0])
        #expect(first["applied"] == 1 && first["refused"] == 0 && first["alreadyRedriven"] == 1, "\(first)")
        let second = try redrive(ports[1])
        #expect(second["applied"] == 0 && second["notRedrivable"] == 1, "\(second)")
        try await ServiceEndToEndTests.eventually("the redriven record journalled") {
            try server.psql(name, #"SELECT count(*) FROM tree_journal WHERE convert_from(records, 'UTF8') LIKE '%"seq":90%'"#).text
                .trimmingCharacters(in: .whitespacesAndNewlines) == "1"
        }
        let again = try redrive(ports[0])
        #expect(again["applied"] == 0 && again["alreadyRedriven"] == 2, "\(again)")
    }
}
