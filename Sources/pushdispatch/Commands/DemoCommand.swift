import ArgumentParser
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PushCore
import PushJOSE
import PushService
import PushTestSupport
import Synchronization

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Show the whole service working, with no credentials and no set-up.",
        discussion: """
            Starts the service on SQLite in a temporary folder, with fake FCM, HMS, OAuth and webhook \
            servers on loopback (HTTPS, HTTP/2). Registers sample subscriptions over the REST API, feeds \
            the change records of fixtures/demo/ through the queue file and the Unix socket, and prints \
            what each device and webhook received and why. Exits 0 when every step happened as expected.
            """
    )

    @Option(help: "Give up after this many seconds.")
    var timeout: Double = 50

    @Flag(help: "Keep the temporary folder (store, configuration, queue file) and print where it is.")
    var keep = false

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .error
            return handler
        }
        let demo = try await Demo(keep: keep, timeout: timeout)
        let ok = await demo.run()
        if !ok { throw ExitCode(1) }
    }
}

/// One sample subscription: its REST document, a short name, and why it is there.
struct DemoSubscription {
    var name: String
    var why: String
    var document: JSON
    var provider: String { document["kind"]?.stringValue == "huawei" ? "hms" : document["kind"]?.stringValue == "webhook" ? "webhook" : "fcm" }
    var target: String { provider == "webhook" ? (document["destination"]?.stringValue ?? "") : (document["context"]?.stringValue ?? "") }
    var id = ""
}

final class Demo: @unchecked Sendable {
    // @unchecked Sendable: driven by one task; the printer only reads `subscriptions` after set-up.
    let folder: URL
    let fixtures = ProviderFixtures.root
    let fakes: FakeProviders
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    let secret: String
    let keys: KeyRing
    let keep: Bool
    let timeout: Double
    var subscriptions: [DemoSubscription] = []
    var port = 0
    var service: Task<Void, any Error>?
    let stopper = ServiceStopper()
    var failures: [String] = []
    let printed = Mutex(0)
    static let webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    init(keep: Bool, timeout: Double) async throws {
        self.keep = keep
        self.timeout = timeout
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-demo-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        fakes = try await FakeProviders.start(tls: true, webhooks: ["orders": Self.webhookSecret])
        secret = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        keys = try KeyRing(jwkSetText: Array(try Data(contentsOf: fixtures.appendingPathComponent("jose/test-keyset.json"))))
    }

    func say(_ text: String = "") {
        print(text)
        fflush(nil)
    }

    func run() async -> Bool {
        do {
            try await story()
        } catch {
            failures.append("the demo stopped: \(error)")
        }
        stopper.stop()
        _ = try? await service?.value
        await fakes.stop()
        try? await client.shutdown()
        if keep {
            say("The store, configuration and queue file are kept in \(folder.path)")
        } else {
            try? FileManager.default.removeItem(at: folder)
        }
        if failures.isEmpty {
            say("\nThe demo ran as expected.")
            return true
        }
        say("\nThe demo did not run as expected:")
        for failure in failures { say("  - \(failure)") }
        return false
    }

    // MARK: - The story

    func story() async throws {
        say("pushdispatch demo: the service, fake providers on loopback, and a sample change stream.\n")
        let configuration = try writeConfiguration()
        // The first answer to flaky-phone is a 503, as FCM answers when it is overloaded.
        fakes.script("flaky-phone", [.recorded("fcm-unavailable"), .normal])
        try await startService(configuration)

        say("1. Subscriptions, registered through the REST API as user alice of app toto:")
        try await register()

        say("\n2. Change records appended to the queue file \(folder.appendingPathComponent("changes.ndjson").lastPathComponent), and what went out:")
        let printer = Task { await self.follow() }
        let queueFile = folder.appendingPathComponent("changes.ndjson")
        guard FileManager.default.createFile(atPath: queueFile.path, contents: nil) else {
            throw DemoError("cannot create the queue file \(queueFile.path)")
        }
        let handle = try FileHandle(forWritingTo: queueFile)
        for line in try lines("demo/changes.ndjson") {
            say("   » record \(summary(line))")
            try handle.seekToEnd()
            try handle.write(contentsOf: Data((line + "\n").utf8))
            try await waitQuietly()
        }
        try handle.close()

        say("\n3. Change records sent on the Unix socket, each acknowledged once durable:")
        let socket = try SocketClient(path: folder.appendingPathComponent("pushdispatch.sock").path)
        for line in try lines("demo/socket.ndjson") {
            say("   » record \(summary(line))")
            socket.send(line + "\n")
            let answers = try await onThread { socket.answers(1, timeout: 10) }
            say("     socket answered \(answers.first ?? "nothing")")
            try await waitQuietly()
        }

        try await waitForExpectations()
        printer.cancel()
        _ = await printer.value
        try await checkRevoked()
        try await summaryTable()
        try await metrics()
    }

    /// The configuration (JSON, which is YAML) pointing the service at the fakes.
    func writeConfiguration() throws -> ServiceConfiguration {
        let serviceAccount = folder.appendingPathComponent("service-account.json")
        try Data(fakes.serviceAccountJSON).write(to: serviceAccount)
        let document: JSON = [
            "store": ["sqlite": .string(folder.appendingPathComponent("pushdispatch.db").path)],
            "ingest": [
                "queueFile": .string(folder.appendingPathComponent("changes.ndjson").path),
                "socket": .string(folder.appendingPathComponent("pushdispatch.sock").path),
                "deadLetter": .string(folder.appendingPathComponent("dead-letter.ndjson").path),
            ],
            "http": ["host": "127.0.0.1", "port": 0],
            "delivery": ["caFile": .string(fixtures.appendingPathComponent("tls/ca.pem").path)],
            "apps": [
                "toto": [
                    "auth": ["hs256Secret": .string(secret)],
                    "fcm": ["serviceAccountFile": .string(serviceAccount.path), "endpoint": .string(fakes.fcmEndpoint)],
                    "hms": [
                        "clientId": .string(fakes.hmsClientID), "clientSecret": .string(fakes.hmsClientSecret), "endpoint": .string(fakes.hmsEndpoint),
                        "tokenEndpoint": .string(fakes.hmsTokenEndpoint),
                    ],
                    "webhooks": ["orders": ["url": .string(fakes.webhookURL("orders")), "secret": .string(Self.webhookSecret)]],
                    "keys": .string(fixtures.appendingPathComponent("jose/test-keyset.json").path),
                    "signingKey": "sig-es",
                ]
            ],
        ]
        var writer = JSONWriter()
        writer.write(document)
        let path = folder.appendingPathComponent("pushdispatch.json")
        try Data(writer.bytes).write(to: path)
        return try ConfigurationLoader.load(path: path.path, environment: [:])
    }

    func startService(_ configuration: ServiceConfiguration) async throws {
        var logger = Logger(label: "pushdispatch")
        logger.logLevel = .error
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        service = Task {
            defer { continuation.finish() }
            try await ServiceRuntime(configuration: configuration, logger: logger).run(
                onListening: { continuation.yield($0) }, stopper: stopper)
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            _ = try await service?.value
            throw DemoError("the service stopped before listening")
        }
        self.port = port
        let deadline = Date().addingTimeInterval(10)
        while try await get("/readyz").status != 200 {
            guard Date() < deadline else { throw DemoError("the service did not become ready") }
            try await Task.sleep(for: .milliseconds(20))
        }
        say("The service listens on http://127.0.0.1:\(port) (REST API, /metrics, /readyz, /status); SQLite store in \(folder.path)")
        say("Fake FCM, HMS, Google OAuth, HMS OAuth and webhook receiver: \(fakes.baseURL) (HTTPS, HTTP/2, test CA).\n")
    }

    func register() async throws {
        let devicePublicKey = keys.keys.first { $0.kid == "dev-ec" }?.publicJSON ?? .null
        let list = try JSONParser.parse(Array(try Data(contentsOf: fixtures.appendingPathComponent("demo/subscriptions.json"))))
        for item in list.arrayValue ?? [] {
            guard case .object(var document) = item["doc"] ?? .null else { continue }
            if document[Key("encryption")] == .string("DEVICE-KEY") {
                document = document.setting(Key("encryption"), to: ["alg": "ECDH-ES", "enc": "A256GCM", "kid": "dev-ec", "jwk": devicePublicKey])
            }
            var subscription = DemoSubscription(
                name: item["name"]?.stringValue ?? "?", why: item["why"]?.stringValue ?? "", document: .object(document))
            var writer = JSONWriter()
            writer.write(subscription.document)
            let answer = try await request("/datasync/v2/toto/subscriptions/alice", method: .POST, body: writer.bytes)
            guard answer.status == 201, let json = try? JSONParser.parse(answer.body), let id = json["id"]?.stringValue else {
                throw DemoError("registering \(subscription.name) answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
            }
            subscription.id = id
            subscriptions.append(subscription)
            say("   POST → 201  \(pad(subscription.name, 10)) \(pad(subscription.provider, 8)) \(subscription.why)")
        }
    }

    /// Prints what the fakes receive as it arrives.
    func follow() async {
        while !Task.isCancelled {
            printNew()
            try? await Task.sleep(for: .milliseconds(25))
        }
        printNew()
    }

    func printNew() {
        let received = fakes.received.filter { ["fcm", "hms", "webhook"].contains($0.provider) }
        let start = printed.withLock { count -> Int in
            defer { count = received.count }
            return count
        }
        guard start < received.count else { return }
        for request in received[start...] { describe(request) }
    }

    func describe(_ request: FakeProviders.Received) {
        let subscription = subscriptions.first { $0.provider == request.provider && $0.target == request.target }
        let name = subscription?.name ?? request.target
        let answer: String
        switch (request.provider, request.status) {
        case (_, 200) where request.provider == "hms": answer = "HMS answered 200 (code 80000000, success)"
        case (_, 200) where retried(request): answer = "FCM answered 200: the retry of the 503 above went through"
        case (_, 200): answer = "\(request.provider == "fcm" ? "FCM" : "the webhook") answered 200"
        case ("fcm", 503): answer = "FCM answered 503 UNAVAILABLE: retried after the back-off (1 s ±20 %)"
        case ("hms", _) where String(decoding: request.data, as: UTF8.self).contains("OnlyKeys"): answer = "HMS answered 200"
        case ("fcm", 404): answer = "FCM answered 404 UNREGISTERED: the subscription is revoked (reason delivery_rejected), nothing more is sent to it"
        default: answer = "answered \(request.status)"
        }
        say("     → \(pad(name, 10)) via \(pad(request.provider, 7)) \(answer)")
        guard request.status == 200 || request.status == 404 || request.status == 503 else { return }
        let event: String
        if request.provider == "webhook" {
            event = "body " + String(decoding: request.data, as: UTF8.self)
        } else {
            let payload = String(decoding: request.data, as: UTF8.self)
            let version = payload.contains("\"ver\":\"v2\"") ? (payload.contains("\"kid\"") ? "v2, encrypted (JWE)" : "v2, signed (JWS)") : "v1"
            let size = request.data.count
            if let decoded = try? PayloadDecoder(keys: keys).decode(request.data) {
                event = "\(version), \(size) bytes; decoded: \(String(decoding: decoded, as: UTF8.self).clipped(220))"
            } else {
                event = "\(version), \(size) bytes: \(payload.clipped(220))"
            }
        }
        say("                        \(event)")
    }

    /// Whether the request before this one to the same target was refused with a 503.
    func retried(_ request: FakeProviders.Received) -> Bool {
        let earlier = fakes.received(provider: request.provider).filter { $0.target == request.target && $0.arrivedAt <= request.arrivedAt }
        return earlier.count >= 2 && earlier[earlier.count - 2].status == 503
    }

    /// Waits until nothing new arrived at the fakes for a moment (the notifications of a record
    /// have gone out).
    func waitQuietly() async throws {
        var last = -1
        var stable = 0
        while stable < 6 {
            try await Task.sleep(for: .milliseconds(50))
            let count = fakes.received.count
            stable = count == last ? stable + 1 : 0
            last = count
        }
    }

    func statuses(_ name: String) -> [Int] {
        guard let subscription = subscriptions.first(where: { $0.name == name }) else { return [] }
        return fakes.received(provider: subscription.provider).filter { $0.target == subscription.target }.map(\.status)
    }

    /// Every step of the story, checked: what each device and webhook must have received.
    func waitForExpectations() async throws {
        let expectations: [(String, () -> Bool)] = [
            ("pixel received its profile, then a TooBig payload", { self.statuses("pixel").filter { $0 == 200 }.count >= 3 && self.seen("pixel", "TooBig") }),
            ("iphone was woken up for the inbox", { self.statuses("iphone").contains(200) }),
            ("mate received child events, then an OnlyKeys one", { self.statuses("mate").filter { $0 == 200 }.count >= 3 && self.seen("mate", "OnlyKeys") }),
            ("tablet received encrypted values", { self.statuses("tablet").filter { $0 == 200 }.count >= 3 }),
            ("the webhook received the order", { self.statuses("crm").contains(200) }),
            ("flaky-phone: a 503, then delivered after the retry", { self.statuses("flaky").first == 503 && self.statuses("flaky").contains(200) }),
            ("old-phone: UNREGISTERED once, then nothing", { self.statuses("old-phone") == [404] }),
        ]
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if expectations.allSatisfy({ $0.1() }) { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        try await waitQuietly()
        for (what, holds) in expectations where !holds() { failures.append(what) }
    }

    /// Whether `name` received a payload whose event has status `status`.
    func seen(_ name: String, _ status: String) -> Bool {
        guard let subscription = subscriptions.first(where: { $0.name == name }) else { return false }
        return fakes.received(provider: subscription.provider).contains { request in
            guard request.target == subscription.target, let event = try? PayloadDecoder(keys: keys).decode(request.data) else { return false }
            return (try? JSONParser.parse(event))?["s"] == .string(status)
        }
    }

    func checkRevoked() async throws {
        guard let old = subscriptions.first(where: { $0.name == "old-phone" }) else { return }
        let answer = try await request("/datasync/v2/toto/subscriptions/alice/\(old.id)", method: .GET, body: nil)
        say("\n4. After UNREGISTERED: GET of old-phone's subscription answers \(answer.status) (it was revoked and deleted).")
        if answer.status != 404 { failures.append("old-phone's subscription still exists (\(answer.status))") }
    }

    func summaryTable() async throws {
        say("\n5. Summary: what each subscription received")
        say("   \(pad("name", 10)) \(pad("provider", 8)) \(pad("mode", 10)) \(pad("format", 7)) \(pad("200", 4)) \(pad("other", 6)) subscribed")
        for subscription in subscriptions {
            let statuses = statuses(subscription.name)
            let answer = try await request("/datasync/v2/toto/subscriptions/alice/\(subscription.id)", method: .GET, body: nil)
            let format = subscription.provider == "webhook" ? "-" : (subscription.document["format"]?.stringValue ?? "v2")
            let mode = subscription.document["mode"]?.stringValue ?? "noData"
            let other = statuses.filter { $0 != 200 }.map(String.init).joined(separator: ",")
            say(
                "   \(pad(subscription.name, 10)) \(pad(subscription.provider, 8)) \(pad(mode, 10)) \(pad(format, 7)) "
                    + "\(pad(String(statuses.filter { $0 == 200 }.count), 4)) \(pad(other.isEmpty ? "-" : other, 6)) \(answer.status == 200 ? "yes" : "no (revoked)")")
        }
    }

    func metrics() async throws {
        let answer = try await get("/metrics")
        let text = String(decoding: answer.body, as: UTF8.self)
        say("\n6. From /metrics (Prometheus text):")
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let interesting = ["pushdispatch_deliveries_total", "pushdispatch_records_ingested_total", "pushdispatch_revocations_total",
                "pushdispatch_retries_total", "pushdispatch_events_total", "pushdispatch_outbox_depth", "pushdispatch_subscriptions"]
            if interesting.contains(where: { line.hasPrefix($0) }), !line.hasSuffix(" 0"), !line.hasSuffix(" 0.0") { say("   \(line)") }
        }
        let status = try await get("/status")
        if let json = try? JSONParser.parse(status.body) {
            say("\n7. pushdispatch status (the same table an operator gets from a running service):")
            for line in StatusTable.render(json).split(separator: "\n", omittingEmptySubsequences: false) { say("   \(line)") }
        }
    }

    // MARK: - Helpers

    func lines(_ name: String) throws -> [String] {
        String(decoding: try Data(contentsOf: fixtures.appendingPathComponent(name)), as: UTF8.self).split(separator: "\n").map(String.init)
    }

    func summary(_ line: String) -> String { line.clipped(110) }

    func token() throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        let claims: JSON = ["sub": "alice", "iat": .int(now), "exp": .int(now + 600)]
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        var writer = JSONWriter()
        writer.write(claims)
        return String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(writer.bytes), as: UTF8.self)
    }

    func get(_ path: String) async throws -> (status: Int, body: [UInt8]) {
        try await request(path, method: .GET, body: nil, authorized: false)
    }

    func request(_ path: String, method: HTTPMethod, body: [UInt8]?, authorized: Bool = true) async throws -> (status: Int, body: [UInt8]) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        if authorized { request.headers.add(name: "authorization", value: "Bearer " + (try token())) }
        if let body {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await client.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), Array(buffer: bytes))
    }
}

struct DemoError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

extension String {
    func clipped(_ limit: Int) -> String {
        count <= limit ? self : String(prefix(limit)) + "… (\(utf8.count) bytes)"
    }
}
