import Foundation
import PushCore
import PushJSON
import PushJOSE
import PushFakes
import PushTestSupport
import Testing

/// The whole service as a user runs it: the real executable, configured for the fake
/// providers; subscriptions created over HTTP; records appended to the queue file and sent on
/// the socket; exactly what the fakes received checked; `/metrics` read with Prometheus's own
/// parser; SIGTERM → exit 0 with nothing lost; a restart goes on where it stopped.
@Suite("The service end to end, as a process", .processLevel, .serialized)
struct ServiceEndToEndTests {
    static let secret = "e2e-secret-of-at-least-thirty-two-bytes!"
    static let webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    static let keyset = ProviderFixtures.root.appendingPathComponent("jose/test-keyset.json")

    static func token(_ subject: String) throws -> String {
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        let claims: JSON = ["sub": .string(subject), "exp": .int(Int64(Date().timeIntervalSince1970) + 600)]
        return String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(Array(claims.description.utf8)), as: UTF8.self)
    }

    static func subscribe(_ port: Int, _ document: String) throws -> String {
        let reply = try RunCommandTests.curl([
            "-X", "POST", "http://127.0.0.1:\(port)/datasync/v2/toto/subscriptions/alice", "-H", "Authorization: Bearer \(try token("alice"))",
            "-H", "Content-Type: application/json", "--data", document,
        ])
        guard reply.status == 201, let id = try JSONParser.parse(Array(reply.body.utf8))["id"]?.stringValue else {
            throw RunningService.ServiceError(message: "POST answered \(reply.status): \(reply.body)")
        }
        return id
    }

    /// The decoded events a target received with status 200, in order.
    static func events(_ fakes: FakeProviders, _ provider: String, _ target: String) throws -> [String] {
        let decoder = PayloadDecoder(keys: try KeyRing(jwkSetText: Array(try Data(contentsOf: keyset))))
        return try fakes.received(provider: provider).filter { $0.target == target && $0.status == 200 }.map {
            provider == "webhook" ? String(decoding: $0.data, as: UTF8.self) : String(decoding: try decoder.decode($0.data), as: UTF8.self)
        }
    }

    static func eventually(_ what: String, timeout: Double = 60, _ condition: () throws -> Bool) async throws {
        let end = Date().addingTimeInterval(timeout)
        while try !condition() {
            guard Date() < end else { throw RunningService.ServiceError(message: "timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// `pushdispatch_deliveries_total` by `provider/outcome`, as Python's prometheus_client
    /// parses the exposition.
    static func parsedDeliveries(_ port: Int) throws -> [String: Int] {
        let metrics = try RunCommandTests.curl(["http://127.0.0.1:\(port)/metrics"])
        #expect(metrics.status == 200)
        #expect(metrics.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        let script = """
            import sys
            from prometheus_client.parser import text_string_to_metric_families
            for family in text_string_to_metric_families(sys.stdin.read()):
                for sample in family.samples:
                    if sample.name == "pushdispatch_deliveries_total":
                        print(sample.labels["provider"] + "/" + sample.labels["outcome"], int(sample.value))
            """
        try PythonPackages.require("prometheus_client")
        let process = TestProcesses.make(command: "python3", ["-c", script])
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try TestProcesses.launch(process)
        input.fileHandleForWriting.write(Data(metrics.body.utf8))
        try input.fileHandleForWriting.close()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw RunningService.ServiceError(message: "prometheus_client could not parse /metrics: \(message)")
        }
        var counts: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2 { counts[String(parts[0])] = Int(parts[1]) }
        }
        return counts
    }

    @Test("subscriptions over HTTP, records by queue file and socket, exact deliveries, metrics, SIGTERM, restart")
    func wholeService() async throws {
        let fakes = try await FakeProviders.start(tls: true, webhooks: ["orders": Self.webhookSecret])
        defer { Task { await fakes.stop() } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson, socket: ./pushdispatch.sock, deadLetter: ./dead.ndjson}
            http: {port: 0}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 60s}
            apps:
              toto:
                auth: {hs256Secret: "\(Self.secret)"}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
                hms: {clientId: "\(fakes.hmsClientID)", clientSecret: "\(fakes.hmsClientSecret)", endpoint: "\(fakes.hmsEndpoint)", tokenEndpoint: "\(fakes.hmsTokenEndpoint)"}
                webhooks: {orders: {url: "\(fakes.webhookURL("orders"))", secret: "\(Self.webhookSecret)"}}
                keys: "\(Self.keyset.path)"
                signingKey: sig-es
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil))

        var service = try RunningService(config: config)
        var port = try await service.port()
        try await Self.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
        _ = try Self.subscribe(port, #"{"kind":"mobile","mode":"value","format":"v1","path":"/a","context":"e2e-fcm"}"#)
        _ = try Self.subscribe(port, #"{"kind":"huawei","mode":"childEvent","format":"v2","path":"/b","context":"e2e-hms"}"#)
        let hook = try Self.subscribe(port, #"{"kind":"webhook","mode":"value","path":"/c","destination":"orders","context":"crm"}"#)
        // No wait: the API answers once the matching index has the subscription.

        try CrashTests.append([#"{"seq":1,"app":"toto","op":"put","path":"/a","data":{"x":1}}"#, #"{"seq":2,"app":"toto","op":"patch","path":"/b","data":{"k1":1,"k2":"two"}}"#], to: folder)
        let socket = try SocketClient(path: folder.appendingPathComponent("pushdispatch.sock").path)
        socket.send(#"{"seq":1,"app":"toto","op":"put","path":"/c","data":"hello"}"# + "\n")
        #expect(try await onThread { socket.answers(1, timeout: 20) } == [#"{"seq":1,"ok":true}"#])

        try await Self.eventually("three deliveries") { fakes.received.filter { ["fcm", "hms", "webhook"].contains($0.provider) }.count >= 3 }
        // Exactly what each received: one message each, the §7 payloads.
        let fcm = fakes.received(provider: "fcm")
        #expect(fcm.map(\.target) == ["e2e-fcm"])
        // (`data` is a map: the fake records it with its keys sorted.)
        #expect(String(decoding: fcm.first?.data ?? [], as: UTF8.self) == #"{"app":"toto","d":"{\"x\":1}","s":"OK","sp":"/a","t":"value"}"#)
        #expect(try Self.events(fakes, "hms", "e2e-hms") == [#"{"t":"v","m":"childEvent","a":"toto","p":"/b","s":"OK","c":{"a":{"k1":1,"k2":"two"},"r":[],"c":{}}}"#])
        let webhook = try Self.events(fakes, "webhook", "orders")
        #expect(webhook.count == 1)
        #expect(webhook.first?.contains(#""subscription":"\#(hook)","path":"/c","context":"crm","event":{"t":"v","m":"value","a":"toto","p":"/c","s":"OK","v":"hello"}}"#) == true)

        // The counters agree with what the fakes received. (Request deadlines are long: on a
        // loaded machine a deadline would turn a slow answer into a retry, a legitimate duplicate.)
        // A fake records a request before it answers, and the service counts a delivery once the
        // answer is read: on a loaded machine the counters can lag the fakes a little.
        var counts: [String: Int] = [:]
        try await Self.eventually("the delivery counters") {
            counts = try Self.parsedDeliveries(port)
            return counts["fcm/delivered"] == 1 && counts["hms/delivered"] == 1 && counts["webhook/delivered"] == 1
        }
        #expect(counts["fcm/retry"] == 0 && counts["fcm/revoked"] == 0)

        // SIGTERM right after a burst: exit 0 in time, and nothing of the burst is lost.
        let burst = (3...42).map { #"{"seq":\#($0),"app":"toto","op":"patch","path":"/b","data":{"n\#($0)":\#($0)}}"# }
        try CrashTests.append(burst[...], to: folder)
        try await Task.sleep(for: .milliseconds(30))
        let stopping = Date()
        #expect(service.stop() == 0)
        #expect(Date().timeIntervalSince(stopping) < 15)

        // A restart goes on where it stopped: the rest of the burst, then a new record; nothing twice.
        service = try RunningService(config: config)
        port = try await service.port()
        try CrashTests.append([#"{"seq":43,"app":"toto","op":"put","path":"/a","data":{"x":2}}"#], to: folder)
        try await Self.eventually("the burst and the new record") {
            let hms = try Self.events(fakes, "hms", "e2e-hms")
            return fakes.received(provider: "fcm").count == 2 && hms.count == 41
        }
        let childEvents = try Self.events(fakes, "hms", "e2e-hms").dropFirst().map { try JSONParser.parse(Array($0.utf8)) }
        // One event per record, in order: child n3 … n42 added once each.
        let added: [String?] = childEvents.map { event in event["c"]?["a"]?.objectValue?.keys.first.map { $0.string } }
        #expect(added == (3...42).map { "n\($0)" }, "\(fakes.received(provider: "hms").map { "\($0.status) \($0.arrivedAt) \($0.headers["authorization"]?.suffix(6) ?? "")" })")
        let last = String(decoding: fakes.received(provider: "fcm").last?.data ?? [], as: UTF8.self)
        #expect(last.contains(#"{\"x\":2}"#))
        try await Task.sleep(for: .milliseconds(300))
        #expect(fakes.received(provider: "webhook").count == 1)
        // This process's own count: the new record (once its answer is read, as above).
        var after: [String: Int] = [:]
        try await Self.eventually("this process's count of the new record") {
            after = try Self.parsedDeliveries(port)
            return after["fcm/delivered"] == 1
        }
        #expect((after["hms/delivered"] ?? 0) <= 40)
        #expect(service.stop() == 0)
    }
}
