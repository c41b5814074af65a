import Crypto
import Foundation
import PushCore
import PushJSON
import PushJOSE
import PushFakes
import PushTestSupport
import Testing

/// `pushdispatch run` as a user runs it, with APNs and Web Push (issue 24) pointed at the
/// fakes: subscriptions over REST (and the refusals that keep a subscriber's URL from being
/// turned against the service), records through the socket, what the fake APNs and the fake
/// push service received decoded, and every row of both answer tables through the process.
@Suite("APNs and Web Push end to end, as a process", .processLevel, .serialized)
struct DirectProvidersEndToEndTests {
    static let keyset = ProviderFixtures.root.appendingPathComponent("jose/test-keyset.json")

    static func secret(_ app: String) -> String { "e2e-\(app)-secret-of-at-least-thirty-two-bytes" }

    static func token(_ app: String, _ subject: String) throws -> String {
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret(app).utf8)))])
        let claims: JSON = ["sub": .string(subject), "exp": .int(Int64(Date().timeIntervalSince1970) + 600)]
        return String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(Array(claims.description.utf8)), as: UTF8.self)
    }

    static func post(_ port: Int, app: String, _ document: String) throws -> (status: Int, body: String) {
        let reply = try RunCommandTests.curl([
            "-X", "POST", "http://127.0.0.1:\(port)/datasync/v2/\(app)/subscriptions/alice", "-H", "Authorization: Bearer \(try token(app, "alice"))",
            "-H", "Content-Type: application/json", "--data", document,
        ])
        return (reply.status, reply.body)
    }

    static func subscribe(_ port: Int, app: String = "toto", _ document: String) throws -> String {
        let reply = try post(port, app: app, document)
        guard reply.status == 201, let id = try JSONParser.parse(Array(reply.body.utf8))["id"]?.stringValue else {
            throw RunningService.ServiceError(message: "POST answered \(reply.status): \(reply.body)")
        }
        return id
    }

    static func exists(_ port: Int, app: String, _ id: String) throws -> Bool {
        let reply = try RunCommandTests.curl([
            "http://127.0.0.1:\(port)/datasync/v2/\(app)/subscriptions/alice/\(id)", "-H", "Authorization: Bearer \(try token(app, "alice"))",
        ])
        return reply.status == 200
    }

    /// A configuration of `apps` (each with APNs and Web Push on the fakes) written to a new folder.
    static func configure(_ fakes: FakeProviders, vapid: P256.Signing.PrivateKey, apps: [String], extra: String = "", webPush: String = "") throws
        -> (folder: URL, config: String)
    {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-direct-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.apnsPrivateKeyPEM.utf8).write(to: folder.appendingPathComponent("AuthKey.p8"))
        try Data(vapid.pemRepresentation.utf8).write(to: folder.appendingPathComponent("vapid.pem"))
        for file in ["AuthKey.p8", "vapid.pem"] {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: folder.appendingPathComponent(file).path)
        }
        var text = """
            store: {sqlite: ./store.db}
            ingest: {socket: ./in.sock, deadLetter: ./dead.ndjson}
            http: {port: 0}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 30s, retry: {initial: 200ms, window: 2h}}
            apps:

            """
        for app in apps {
            text += """
                  \(app):
                    auth: {hs256Secret: "\(secret(app))"}
                    apns: {teamId: \(FakeProviders.apnsTeamID), keyId: \(FakeProviders.apnsKeyID), privateKey: file:./AuthKey.p8, topic: \(FakeProviders.apnsTopic), endpoint: "\(fakes.apnsEndpoint)"}
                    webpush: {vapidPrivateKey: file:./vapid.pem, subject: "mailto:push-admin@example.com", allowPrivateAddresses: true\(webPush)}
                    keys: "\(keyset.path)"
                    signingKey: sig-es

                """
        }
        text += extra
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: config))
        return (folder, config)
    }

    @Test("one push service answering 429 Retry-After: 3600, another refusing our requests: every other browser is delivered, at once, and /readyz stays 200 (issue 33)")
    func pushServicesIsolated() async throws {
        let evil = try await FakeProviders.start(tls: true)
        let good = try await FakeProviders.start(tls: true)
        defer { Task { await evil.stop(); await good.stop() } }
        let vapid = P256.Signing.PrivateKey()
        for fakes in [evil, good] { fakes.setWebPushVAPIDKey(Base64URL.encodeToString(vapid.publicKey.x963Representation)) }
        let (folder, config) = try Self.configure(good, vapid: vapid, apps: ["toto"])
        let service = try RunningService(config: config)
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
        // The throttling push service (evil's origin) and the refusing one (the same origin
        // after it: three subscriptions refused in a row pause it); the others on good's.
        evil.setStanding("throttled", .status(429, body: "{}", retryAfter: "3600"))
        for name in ["refused-1", "refused-2", "refused-3"] { evil.setStanding(name, .recorded("webpush-bad-jwt")) }
        let paths = ["throttled", "refused-1", "refused-2", "refused-3"]
        for name in paths {
            _ = try Self.subscribe(port, #"{"kind":"webpush","mode":"value","format":"v1","path":"/n/\#(name)","context":\#(evil.webPushSubscription(name))}"#)
        }
        for name in ["b1", "b2", "b3"] {
            _ = try Self.subscribe(port, #"{"kind":"webpush","mode":"value","format":"v1","path":"/n/\#(name)","context":\#(good.webPushSubscription(name))}"#)
        }
        let socket = try SocketClient(path: folder.appendingPathComponent("in.sock").path)
        func write(_ seq: Int) async throws {
            socket.send(#"{"seq":\#(seq),"app":"toto","op":"patch","path":"/n","data":{"throttled":\#(seq),"refused-1":\#(seq),"refused-2":\#(seq),"refused-3":\#(seq),"b1":\#(seq),"b2":\#(seq),"b3":\#(seq)}}"#
                + "\n")
            let answers = try await onThread { socket.answers(1, timeout: 30) }
            #expect(answers.first?.contains(#""ok":true"#) == true, "\(answers)")
        }
        func delivered(_ count: Int) -> Bool {
            ["b1", "b2", "b3"].allSatisfy { name in good.received(provider: "webpush").filter { $0.target == name && $0.status == 201 }.count >= count }
        }
        try await write(1)
        try await ServiceEndToEndTests.eventually("the first records to the good push service", timeout: 30) { delivered(1) }
        try await ServiceEndToEndTests.eventually("the throttling answer and three refusals", timeout: 30) {
            evil.received(provider: "webpush").filter { $0.target == "throttled" }.count >= 1
                && Set(evil.received(provider: "webpush").filter { $0.status == 403 }.map(\.target)).count == 3
        }
        // After the 429 with an hour's Retry-After and the push service's pause: the others
        // still get the next record at once.
        try await Task.sleep(for: .milliseconds(300))
        let started = Date()
        try await write(2)
        try await ServiceEndToEndTests.eventually("the second records to the good push service", timeout: 30) { delivered(2) }
        #expect(Date().timeIntervalSince(started) < 15)
        // The throttled one was not tried again within the hour.
        #expect(evil.received(provider: "webpush").filter { $0.target == "throttled" }.count == 1)
        let ready = try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"])
        #expect(ready.status == 200, "\(ready.body)")
        let status = try JSONParser.parse(Array(try RunCommandTests.curl(["http://127.0.0.1:\(port)/status"]).body.utf8))
        let paused = (status["paused"]?.arrayValue ?? []).compactMap { $0["destination"]?.stringValue }
        #expect(paused == [evil.webPushOrigin.lowercased()], "\(status)")
        #expect(await service.stop(within: 60) == 0)
    }

    @Test("REST: a browser subscription must name an accepted push service over https with usable keys; apns and webpush need their configuration")
    func refusals() async throws {
        let fakes = try await FakeProviders.start(tls: true)
        defer { Task { await fakes.stop() } }
        let vapid = P256.Signing.PrivateKey()
        let (_, config) = try Self.configure(
            fakes, vapid: vapid, apps: ["toto"],
            extra: """
                  strict:
                    auth: {hs256Secret: "\(Self.secret("strict"))"}
                    webpush: {vapidPrivateKey: file:./vapid.pem, subject: "mailto:push-admin@example.com", allowedHosts: [fcm.googleapis.com, "*.push.services.mozilla.com"]}
                  bare:
                    auth: {hs256Secret: "\(Self.secret("bare"))"}

                """)
        let service = try RunningService(config: config)
        let port = try await service.port()
        let keys = #""keys":{"p256dh":"BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4","auth":"BTBZMqHH6r4Tts7J_aSIgg"}"#
        func browser(_ endpoint: String, keys: String = keys) -> String {
            #"{"kind":"webpush","mode":"value","path":"/a","context":{"endpoint":"\#(endpoint)",\#(keys)}}"#
        }
        let rows: [(app: String, document: String, status: Int, fragment: String)] = [
            ("strict", browser("https://fcm.googleapis.com/fcm/send/abc"), 201, ""),
            ("strict", browser("https://updates.push.services.mozilla.com/wpush/v2/x"), 201, ""),
            ("strict", browser("https://evil.example/hook"), 400, "not among the application's webpush.allowedHosts"),
            ("strict", browser("http://fcm.googleapis.com/fcm/send/abc"), 400, "must be an https URL"),
            ("toto", browser("http://127.0.0.1:9/push"), 400, "must be an https URL"),
            ("strict", browser("https://127.0.0.1/push"), 400, "allowedHosts"),
            ("strict", browser("https://fcm.googleapis.com/x", keys: #""keys":{"p256dh":"AAAA","auth":"BTBZMqHH6r4Tts7J_aSIgg"}"#), 400, "context.keys.p256dh"),
            ("strict", browser("https://fcm.googleapis.com/x", keys: #""keys":{"p256dh":"BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4","auth":"AAAA"}"#), 400, "context.keys.auth"),
            ("strict", #"{"kind":"webpush","path":"/a","context":"https://fcm.googleapis.com/x"}"#, 400, "not JSON"),
            ("strict", #"{"kind":"apns","path":"/a","context":"740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"}"#, 400, "does not send through APNs"),
            ("bare", browser("https://fcm.googleapis.com/fcm/send/abc"), 400, "does not send Web Push"),
            ("toto", #"{"kind":"apns","path":"/a","context":"not-hex"}"#, 400, "hexadecimal"),
            ("toto", #"{"kind":"apns","path":"/a","context":"740F4707BEBCF74F9B7C25D48E3358945F6AA01DA5DDB387462C7EAF61BB78AD"}"#, 201, ""),
        ]
        for row in rows {
            let reply = try Self.post(port, app: row.app, row.document)
            #expect(reply.status == row.status, "\(row.app) \(row.document.prefix(90)): \(reply.status) \(reply.body)")
            if row.status == 400 {
                #expect(reply.body.contains(#""error":"bad_request""#) && reply.body.contains(row.fragment), "\(reply.body)")
            }
        }
        // The token in lower case is the tuple the upper-case one made.
        let again = try Self.post(port, app: "toto", #"{"kind":"apns","path":"/a","context":"740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"}"#)
        #expect(again.status == 409, "\(again.body)")
        #expect(await service.stop(within: 60) == 0)
    }

    /// One row of the answer tables, through the process: a subscription of its own, its first
    /// answer scripted.
    struct Row {
        var app: String
        var kind: SubscriptionKind
        var fixture: String
        /// `delivered`, `retried`, `revoked`, `failed`, `paused`.
        var expected: String
        var target = ""
        var id = ""
        var index = 0
    }

    static let rows: [Row] = [
        // APNs (reference/apns-webpush.md §1.4 as docs/decisions.md settles it).
        Row(app: "toto", kind: .apns, fixture: "apns-success", expected: "delivered"),
        Row(app: "toto", kind: .apns, fixture: "apns-bad-device-token", expected: "revoked"),
        Row(app: "toto", kind: .apns, fixture: "apns-device-token-not-for-topic", expected: "revoked"),
        Row(app: "toto", kind: .apns, fixture: "apns-unregistered", expected: "revoked"),
        Row(app: "toto", kind: .apns, fixture: "apns-expired-token", expected: "revoked"),
        Row(app: "toto", kind: .apns, fixture: "apns-expired-provider-token", expected: "retried"),
        Row(app: "toto", kind: .apns, fixture: "apns-unrelated-key-id-in-token", expected: "retried"),
        Row(app: "toto", kind: .apns, fixture: "apns-too-many-requests", expected: "retried"),
        Row(app: "toto", kind: .apns, fixture: "apns-too-many-provider-token-updates", expected: "retried"),
        Row(app: "toto", kind: .apns, fixture: "apns-internal-server-error", expected: "retried"),
        Row(app: "toto", kind: .apns, fixture: "apns-service-unavailable", expected: "retried"),
        Row(app: "toto", kind: .apns, fixture: "apns-payload-too-large", expected: "failed"),
        Row(app: "toto", kind: .apns, fixture: "apns-bad-priority", expected: "failed"),
        Row(app: "toto", kind: .apns, fixture: "apns-missing-topic", expected: "failed"),
        Row(app: "p1", kind: .apns, fixture: "apns-topic-disallowed", expected: "paused"),
        Row(app: "p2", kind: .apns, fixture: "apns-invalid-provider-token", expected: "paused"),
        Row(app: "p3", kind: .apns, fixture: "apns-missing-provider-token", expected: "paused"),
        Row(app: "p4", kind: .apns, fixture: "apns-bad-path", expected: "paused"),
        // Web Push (RFC 8030; reference/apns-webpush.md §2).
        Row(app: "toto", kind: .webpush, fixture: "webpush-created", expected: "delivered"),
        Row(app: "toto", kind: .webpush, fixture: "webpush-gone", expected: "revoked"),
        Row(app: "toto", kind: .webpush, fixture: "webpush-not-found", expected: "revoked"),
        Row(app: "toto", kind: .webpush, fixture: "webpush-too-large", expected: "failed"),
        Row(app: "toto", kind: .webpush, fixture: "webpush-rate-limited", expected: "retried"),
        Row(app: "toto", kind: .webpush, fixture: "webpush-server-error", expected: "retried"),
        Row(app: "toto", kind: .webpush, fixture: "webpush-unavailable", expected: "retried"),
        // One subscription refused is retried on its own: the push service is paused only when
        // three different subscriptions are refused in a row (issue 33; DispatchStateMachineTests).
        Row(app: "p1", kind: .webpush, fixture: "webpush-bad-jwt", expected: "retried"),
        Row(app: "p2", kind: .webpush, fixture: "webpush-unauthorized", expected: "retried"),
    ]

    @Test("Declarative Web Push: the application's notification template around the data map, as Python's http_ece decrypts it from what the push service received (issue 34)")
    func declarativeWebPush() async throws {
        try PythonPackages.require("http_ece", package: "http-ece")
        let fakes = try await FakeProviders.start(tls: true)
        defer { Task { await fakes.stop() } }
        let vapid = P256.Signing.PrivateKey()
        fakes.setWebPushVAPIDKey(Base64URL.encodeToString(vapid.publicKey.x963Representation))
        let template = #", notification: {title: "{app}: {path}", body: "{field}", field: headline, navigate: "https://news.example/read{path}"}"#
        let (folder, config) = try Self.configure(fakes, vapid: vapid, apps: ["toto"], webPush: template)
        let service = try RunningService(config: config)
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
        _ = try Self.subscribe(port, #"{"kind":"webpush","mode":"value","format":"v1","path":"/news/today","context":\#(fakes.webPushSubscription("safari"))}"#)
        let socket = try SocketClient(path: folder.appendingPathComponent("in.sock").path)
        socket.send(#"{"seq":1,"app":"toto","op":"put","path":"/news/today","data":{"headline":"Le café ouvre à 8 h","id":7}}"# + "\n")
        let answers = try await onThread { socket.answers(1, timeout: 30) }
        #expect(answers.first?.contains(#""ok":true"#) == true, "\(answers)")
        try await ServiceEndToEndTests.eventually("the delivery") { fakes.received(provider: "webpush").contains { $0.target == "safari" && $0.status == 201 } }
        let received = try #require(fakes.received(provider: "webpush").first { $0.target == "safari" })
        let secrets = try #require(fakes.webPushSubscriberSecrets("safari"))
        let script = """
            import base64, json, sys
            import http_ece
            from cryptography.hazmat.primitives.asymmetric import ec
            def b(t): return base64.urlsafe_b64decode(t + "=" * (-len(t) % 4))
            private = ec.derive_private_key(int.from_bytes(b(sys.argv[1]), "big"), ec.SECP256R1())
            message = json.loads(http_ece.decrypt(b(sys.argv[3]), private_key=private, auth_secret=b(sys.argv[2]), version="aes128gcm"))
            n = message["notification"]
            print(json.dumps([message["web_push"], n["title"], n["body"], n["navigate"], message["t"], message["sp"], json.loads(message["d"])], ensure_ascii=False))
            """
        let process = TestProcesses.make(command: "python3", ["-c", script, secrets.privateKey, secrets.auth, Base64URL.encodeToString(received.raw)])
        let text = try TestProcesses.output(process)
        #expect(
            text.trimmingCharacters(in: .whitespacesAndNewlines)
                == #"[8030, "toto: /news/today", "Le café ouvre à 8 h", "https://news.example/read/news/today", "value", "/news/today", {"headline": "Le café ouvre à 8 h", "id": 7}]"#,
            "\(text)")
    }

    @Test("records through the socket reach the APNs device and the browser (v1, v2 signed, v2 encrypted to the device key); every answer of both tables as the process meets it")
    func deliveriesAndAnswers() async throws {
        let fakes = try await FakeProviders.start(tls: true)
        defer { Task { await fakes.stop() } }
        let vapid = P256.Signing.PrivateKey()
        fakes.setWebPushVAPIDKey(Base64URL.encodeToString(vapid.publicKey.x963Representation))
        let apps = ["toto", "p1", "p2", "p3", "p4"]
        let (folder, config) = try Self.configure(fakes, vapid: vapid, apps: apps)
        let service = try RunningService(config: config)
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }

        // Payload formats: what each device gets, decoded as an app would.
        let keyRing = try KeyRing(jwkSetText: Array(try Data(contentsOf: Self.keyset)))
        let deviceKey = try #require(keyRing.key(kid: "dev-ec", use: .encryption))
        let publicJWK = try #require(deviceKey.publicJSON)
        let iphone = String(repeating: "a1", count: 32)
        _ = try Self.subscribe(port, #"{"kind":"apns","mode":"value","format":"v2","path":"/formats/a","context":"\#(iphone)"}"#)
        let browserV1 = fakes.webPushSubscription("browser-v1")
        let browserV2 = fakes.webPushSubscription("browser-v2")
        _ = try Self.subscribe(port, #"{"kind":"webpush","mode":"childEvent","format":"v1","path":"/formats/b","context":\#(browserV1)}"#)
        _ = try Self.subscribe(
            port,
            #"{"kind":"webpush","mode":"value","format":"v2","path":"/formats/c","context":\#(JSON.string(browserV2).description),"encryption":{"alg":"ECDH-ES","enc":"A256GCM","jwk":\#(publicJWK.description)}}"#)

        // The rows: a subscription each, its first answer scripted.
        var rows = Self.rows
        for index in rows.indices {
            rows[index].index = index
            rows[index].target = rows[index].kind == .apns ? String(format: "%064x", index + 1) : "row-\(index)"
            let context = rows[index].kind == .apns ? "\"\(rows[index].target)\"" : fakes.webPushSubscription(rows[index].target)
            if rows[index].fixture != "apns-success" && rows[index].fixture != "webpush-created" {
                // A recorded Retry-After of minutes is cut to a second: the process waits in real time.
                let answer = ProviderFixtures.answer(rows[index].fixture)
                let first: FakeProviders.Step =
                    answer.retryAfter == nil
                    ? .recorded(rows[index].fixture) : .status(answer.status, body: String(decoding: answer.body, as: UTF8.self), retryAfter: "1")
                fakes.script(rows[index].target, [first, .normal])
            }
            rows[index].id = try Self.subscribe(
                port, app: rows[index].app, #"{"kind":"\#(rows[index].kind.rawValue)","mode":"value","format":"v1","path":"/rows/\#(index)","context":\#(context)}"#)
        }

        let socket = try SocketClient(path: folder.appendingPathComponent("in.sock").path)
        var lines = [
            #"{"seq":1,"app":"toto","op":"put","path":"/formats","data":{"a":{"n":1},"b":{"x":"é"},"c":[1,2]}}"#
        ]
        for app in apps {
            lines.append(#"{"seq":\#(lines.count + 1),"app":"\#(app)","op":"put","path":"/rows","data":{\#(rows.filter { $0.app == app }.map { "\"\($0.index)\":{\"v\":\($0.index)}" }.joined(separator: ","))}}"#)
        }
        socket.send(lines.joined(separator: "\n") + "\n")
        let expected = lines.count
        let answers = try await onThread { socket.answers(expected, timeout: 30) }
        #expect(answers.count == lines.count && answers.allSatisfy { $0.contains(#""ok":true"#) }, "\(answers)")

        // The formats.
        try await ServiceEndToEndTests.eventually("the three format deliveries") {
            fakes.received(provider: "apns").contains { $0.target == iphone && $0.status == 200 }
                && fakes.received(provider: "webpush").filter { ($0.target == "browser-v1" || $0.target == "browser-v2") && $0.status == 201 }.count == 2
        }
        let decoder = PayloadDecoder(keys: keyRing)
        let apnsBody = String(decoding: try #require(fakes.received(provider: "apns").first { $0.target == iphone }).data, as: UTF8.self)
        #expect(apnsBody.hasPrefix(#"{"aps":{"content-available":1},"srv":"webcom","evt":""#), "\(apnsBody)")
        let dataMap = "{" + apnsBody.dropFirst(#"{"aps":{"content-available":1},"#.count)
        #expect(String(decoding: try decoder.decode(Array(dataMap.utf8)), as: UTF8.self) == #"{"t":"v","m":"value","a":"toto","p":"/formats/a","s":"OK","v":{"n":1}}"#)
        let v1 = String(decoding: try #require(fakes.received(provider: "webpush").first { $0.target == "browser-v1" }).data, as: UTF8.self)
        #expect(v1 == #"{"s":"OK","t":"childEvent","app":"toto","sp":"/formats/b","added":"{\"x\":\"é\"}","removed":"[]","changed":"{}"}"#)
        let v2 = try #require(fakes.received(provider: "webpush").first { $0.target == "browser-v2" })
        let v2Map = try JSONParser.parse(v2.data)
        #expect(v2Map["kid"]?.stringValue == nil || v2Map["kid"]?.stringValue == "dev-ec")
        #expect(String(decoding: try decoder.decode(v2.data), as: UTF8.self) == #"{"t":"v","m":"value","a":"toto","p":"/formats/c","s":"OK","v":{"0":1,"1":2}}"#)

        // The rows.
        func sends(_ row: Row) -> [FakeProviders.Received] { fakes.received(provider: row.kind == .apns ? "apns" : "webpush").filter { $0.target == row.target } }
        let success = { (row: Row) in row.kind == .apns ? 200 : 201 }
        func pending() throws -> [String] {
            try rows.filter { row in
                switch row.expected {
                case "delivered", "retried": return sends(row).last?.status != success(row)
                case "revoked": return try Self.exists(port, app: row.app, row.id)
                default: return sends(row).isEmpty
                }
            }.map { "\($0.fixture): \(sends($0).map(\.status))" }
        }
        let end = Date().addingTimeInterval(90)
        while try !pending().isEmpty && Date() < end { try await Task.sleep(for: .milliseconds(100)) }
        let left = try pending()
        #expect(left.isEmpty, "rows without their outcome: \(left); log: \(service.log.withLock { $0 }.suffix(3000))")
        // Four applications paused for their APNs credentials: reported by /status and the
        // metrics, while /readyz stays 200 (the instance still serves the API and every other
        // sender; issue 33).
        func pausedApps() throws -> [String] {
            let status = try JSONParser.parse(Array(try RunCommandTests.curl(["http://127.0.0.1:\(port)/status"]).body.utf8))
            return (status["paused"]?.arrayValue ?? []).filter { $0["kind"]?.stringValue == "apns" }.compactMap { $0["app"]?.stringValue }.sorted()
        }
        let statusEnd = Date().addingTimeInterval(20)
        while try pausedApps() != ["p1", "p2", "p3", "p4"] && Date() < statusEnd { try await Task.sleep(for: .milliseconds(100)) }
        #expect(try pausedApps() == ["p1", "p2", "p3", "p4"])
        let ready = try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"])
        #expect(ready.status == 200, "/readyz: \(ready.status) \(ready.body)")
        let metrics = try RunCommandTests.curl(["http://127.0.0.1:\(port)/metrics"])
        #expect(metrics.body.contains("pushdispatch_apps_paused 4"), "\(metrics.body.split(separator: "\n").filter { $0.contains("paused") })")
        try await Task.sleep(for: .seconds(1))  // what could still (wrongly) go out, would
        for row in rows {
            let got = sends(row)
            switch row.expected {
            case "delivered":
                #expect(got.map(\.status) == [success(row)], "\(row.fixture)")
            case "retried":
                #expect(got.count >= 2 && got.last?.status == success(row), "\(row.fixture): \(got.map(\.status))")
            case "revoked":
                #expect(got.count == 1, "\(row.fixture): nothing more to a dead token: \(got.map(\.status))")
            case "failed":
                let kept = try Self.exists(port, app: row.app, row.id)
                #expect(got.count == 1 && kept, "\(row.fixture): dropped, kept")
            case "paused":
                let kept = try Self.exists(port, app: row.app, row.id)
                #expect(got.count == 1 && kept, "\(row.fixture): paused, kept: \(got.map(\.status))")
            default:
                Issue.record("unknown expectation \(row.expected)")
            }
        }
        let deliveries = try ServiceEndToEndTests.parsedDeliveries(port)
        #expect(deliveries["apns/revoked"] == 4 && deliveries["webpush/revoked"] == 2, "\(deliveries)")
        #expect(deliveries["apns/failed"] == 3 && deliveries["webpush/failed"] == 1, "\(deliveries)")
        // One provider token for the five applications of one team and key (APNs counts
        // renewals per team), never renewed (younger than 20 minutes, even when refused as
        // expired).
        #expect(Set(fakes.received(provider: "apns").compactMap { $0.headers["authorization"] }).count == 1)
        #expect(await service.stop(within: 60) == 0)
    }
}
