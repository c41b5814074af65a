import Crypto
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PushCore
import PushJSON
import PushJOSE
import PushService
import PushFakes
import Synchronization

/// One sample subscription: its REST document, a short name, and why it is there.
struct DemoSubscription {
    var name: String
    var why: String
    var document: JSON
    var provider: String {
        switch document["kind"]?.stringValue {
        case "huawei": "hms"
        case "webhook": "webhook"
        case "apns": "apns"
        case "webpush": "webpush"
        default: "fcm"
        }
    }
    /// What the fakes record as the target: the webhook's name, the browser subscription's
    /// name, else the device token.
    var target: String {
        switch provider {
        case "webhook": document["destination"]?.stringValue ?? ""
        case "webpush": Demo.browser
        default: document["context"]?.stringValue ?? ""
        }
    }
    var id = ""
}

/// `pushdispatch demo`: the whole service on SQLite in a temporary folder, with the fake
/// providers of PushTestSupport on loopback; it registers sample subscriptions, feeds the
/// records of `fixtures/demo/`, and prints and checks what each device and webhook received.
public final class Demo: @unchecked Sendable {
    // @unchecked Sendable: driven by one task; the printer only reads `subscriptions` after set-up.
    let folder: URL
    let fixtures = ProviderFixtures.root
    let fakes: FakeProviders
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    let secret: String
    let keys: KeyRing
    let keep: Bool
    let timeout: Double
    /// Keep the service and the fakes running after the story, for the console.
    let console: Bool
    /// The operations token of the demo's service (the console's sign-in).
    let operationsToken: String
    var subscriptions: [DemoSubscription] = []
    var port = 0
    var service: Task<Void, any Error>?
    let stopper = ServiceStopper()
    var failures: [String] = []
    let printed = Mutex(0)
    static let webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    /// The name of Alice's browser subscription at the fake push service.
    static let browser = "firefox-alice"

    /// - Parameters:
    ///   - keep: keep the temporary folder (and say where it is).
    ///   - timeout: give up after this many seconds.
    ///   - console: after the story, keep the service and the fakes running and print the
    ///     console's address and token, until interrupted.
    public init(keep: Bool, timeout: Double, console: Bool = false) async throws {
        self.keep = keep
        self.timeout = timeout
        self.console = console
        operationsToken = "demo-" + (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
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

    /// Runs the story; whether every step happened as expected.
    public func run() async -> Bool {
        do {
            try await story()
        } catch {
            failures.append("the demo stopped: \(error)")
        }
        if console && failures.isEmpty {
            say("\nThe console: http://127.0.0.1:\(port)/console")
            say("Sign in with the operations token \(operationsToken)")
            say("It shows the story's history: the 503 then the delivery of flaky-phone, who got nothing and why, the live attempts.")
            say("The service and the fake providers keep running; Ctrl-C stops them.")
            // The service stops on SIGINT or SIGTERM by itself (its group listens for them).
            _ = try? await service?.value
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
        try await pacing()
    }

    /// The configuration (JSON, which is YAML) pointing the service at the fakes.
    func writeConfiguration() throws -> ServiceConfiguration {
        let serviceAccount = folder.appendingPathComponent("service-account.json")
        try Data(fakes.serviceAccountJSON).write(to: serviceAccount)
        // APNs: the fake team's .p8; Web Push: an application server key made for the run.
        let apnsKey = folder.appendingPathComponent("AuthKey_\(FakeProviders.apnsKeyID).p8")
        let vapid = P256.Signing.PrivateKey()
        let vapidKey = folder.appendingPathComponent("vapid.pem")
        for (file, text) in [(serviceAccount, String(decoding: fakes.serviceAccountJSON, as: UTF8.self)), (apnsKey, fakes.apnsPrivateKeyPEM), (vapidKey, vapid.pemRepresentation)] {
            try Data(text.utf8).write(to: file)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        }
        fakes.setWebPushVAPIDKey(Base64URL.encodeToString(vapid.publicKey.x963Representation))
        let document: JSON = [
            "store": ["sqlite": .string(folder.appendingPathComponent("pushdispatch.db").path)],
            "ingest": [
                "queueFile": .string(folder.appendingPathComponent("changes.ndjson").path),
                "socket": .string(folder.appendingPathComponent("pushdispatch.sock").path),
                "deadLetter": .string(folder.appendingPathComponent("dead-letter.ndjson").path),
            ],
            "http": ["host": "127.0.0.1", "port": 0, "operationsToken": .string(operationsToken)],
            "delivery": ["caFile": .string(fixtures.appendingPathComponent("tls/ca.pem").path)],
            "apps": [
                "toto": [
                    "auth": ["hs256Secret": .string(secret)],
                    "fcm": ["serviceAccountFile": .string(serviceAccount.path), "endpoint": .string(fakes.fcmEndpoint)],
                    "hms": [
                        "clientId": .string(fakes.hmsClientID), "clientSecret": .string(fakes.hmsClientSecret), "endpoint": .string(fakes.hmsEndpoint),
                        "tokenEndpoint": .string(fakes.hmsTokenEndpoint),
                    ],
                    "apns": [
                        "teamId": .string(FakeProviders.apnsTeamID), "keyId": .string(FakeProviders.apnsKeyID), "privateKey": .string("file:" + apnsKey.path),
                        "topic": .string(FakeProviders.apnsTopic), "endpoint": .string(fakes.apnsEndpoint),
                    ],
                    // The fake push service is on loopback: allowed here, refused by default.
                    "webpush": ["vapidPrivateKey": .string("file:" + vapidKey.path), "subject": "mailto:demo@example.com", "allowPrivateAddresses": true],
                    "webhooks": ["orders": ["url": .string(fakes.webhookURL("orders")), "secret": .string(Self.webhookSecret)]],
                    "keys": .string(fixtures.appendingPathComponent("jose/test-keyset.json").path),
                    "signingKey": "sig-es",
                    "rules": .string(fixtures.appendingPathComponent("demo/rules.json").path),
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
        say("Fake FCM, HMS, APNs, Web Push service, Google OAuth, HMS OAuth and webhook receiver: \(fakes.baseURL) (HTTPS, HTTP/2, test CA).\n")
    }

    func register() async throws {
        let devicePublicKey = keys.keys.first { $0.kid == "dev-ec" }?.publicJSON ?? .null
        let list = try JSONParser.parse(Array(try Data(contentsOf: fixtures.appendingPathComponent("demo/subscriptions.json"))))
        for item in list.arrayValue ?? [] {
            guard case .object(var document) = item["doc"] ?? .null else { continue }
            if document[Key("context")] == .string("BROWSER-SUBSCRIPTION") {
                // What the browser's PushSubscription.toJSON() gives the app: the fake push
                // service made the subscription and keeps its private key.
                document = document.setting(Key("context"), to: try JSONParser.parse(Array(fakes.webPushSubscription(Self.browser).utf8)))
            }
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
        // The read rules (fixtures/demo/rules.json): each user reads her own subtree only.
        let bobs = Array(#"{"kind":"mobile","mode":"value","path":"/users/bob/inbox","context":"pixel-alice"}"#.utf8)
        let refused = try await request("/datasync/v2/toto/subscriptions/alice", method: .POST, body: bobs)
        let code = (try? JSONParser.parse(refused.body))?["error"]?.stringValue ?? "?"
        say("   POST → \(refused.status)  \(pad("bob-inbox", 10)) \(pad("fcm", 8)) refused by the read rules (\(code)): alice may read her own subtree only")
        if refused.status != 403 || code != "permission_denied" {
            failures.append("alice could subscribe to bob's inbox (\(refused.status) \(code))")
        }
    }
}
