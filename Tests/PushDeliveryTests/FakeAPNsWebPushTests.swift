import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOSSL
import PushCore
@testable import PushDelivery
import PushJOSE
@testable import PushTestSupport
import Testing

/// The fake APNs and Web Push providers (issue 24), driven over HTTPS and HTTP/2 by the real
/// transport: what they accept, each check they make (a row that fails if the check goes), the
/// recorded answers they give, and their scripts.
@Suite("Fake APNs and Web Push providers")
struct FakeAPNsWebPushTests {
    static let ca = ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path
    static let start: Int64 = 1_800_000_000_000

    /// Fakes on TLS with a manual clock, the HTTP/2 transport to them, and `body` run with both.
    static func withFakes(_ body: (FakeProviders, HTTP2Transport, ManualClock) async throws -> Void) async throws {
        let clock = ManualClock(start: start)
        let fakes = try await FakeProviders.start(tls: true, clock: clock)
        let transport = try HTTP2Transport(
            configuration: .init(connectionsPerOrigin: 1, caFile: ca), fallback: try AsyncHTTPTransport(clients: 1, caFile: ca))
        do {
            try await warmUp(transport, fakes)
            try await body(fakes, transport, clock)
        } catch {
            try? await transport.shutdown()
            await fakes.stop()
            throw error
        }
        try await transport.shutdown()
        await fakes.stop()
    }

    /// Opens the transport's one connection with a request no fake records (an unknown path,
    /// 404), tried up to 5 times. Under CPU load the transport's first connection to a freshly
    /// started fake sometimes closes before its first answer ("the connection is closing",
    /// "closed before the answer"; async-http-client never does, and connections that worked
    /// keep working): that is the transport's to fix, not what these tests are about.
    static func warmUp(_ transport: HTTP2Transport, _ fakes: FakeProviders) async throws {
        let request = OutgoingRequest(url: fakes.baseURL + "/warm-up", headers: [], body: [])
        var failure: TransportError?
        for _ in 0..<5 {
            do {
                _ = try await transport.send(request, timeout: .seconds(10))
                return
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    static func send(_ transport: HTTP2Transport, _ request: OutgoingRequest) async throws -> ProviderAnswer {
        try await transport.send(request, timeout: .seconds(10))
    }

    /// `header.claims.signature` (ES256, JOSE's raw r‖s) over the two JSON texts as given.
    static func jwt(header: String, claims: String, key: P256.Signing.PrivateKey) throws -> String {
        let input = Base64URL.encodeToString(Array(header.utf8)) + "." + Base64URL.encodeToString(Array(claims.utf8))
        return input + "." + Base64URL.encodeToString(try key.signature(for: Array(input.utf8)).rawRepresentation)
    }

    static func reason(_ answer: ProviderAnswer) -> String? { (try? JSONParser.parse(answer.body))?["reason"]?.stringValue }

    // MARK: - APNs

    /// A push to the fake APNs, well formed until a row changes it.
    struct APNsPush: Sendable {
        var token = String(repeating: "0f", count: 32)
        var headers: [(String, String)] = []
        var body = Array(#"{"aps":{"content-available":1},"t":"noData","app":"toto","sp":"/p"}"#.utf8)

        init(authorization: String, now: Int64) {
            headers = [
                ("authorization", "bearer " + authorization), ("apns-topic", FakeProviders.apnsTopic), ("apns-push-type", "background"),
                ("apns-priority", "5"), ("apns-expiration", String(now + 3_600)),
            ]
        }

        /// Replaces (or removes, with `nil`) a header.
        mutating func set(_ name: String, _ value: String?) {
            headers.removeAll { $0.0 == name }
            if let value { headers.append((name, value)) }
        }

        func request(_ fakes: FakeProviders) -> OutgoingRequest {
            OutgoingRequest(url: fakes.apnsEndpoint + "/3/device/" + token, headers: headers, body: body)
        }
    }

    /// What a row may use: the team key and the fake's time in seconds.
    struct APNsContext {
        var key: P256.Signing.PrivateKey
        var now: Int64
        var kid: String { FakeProviders.apnsKeyID }
        var iss: String { FakeProviders.apnsTeamID }

        func token(header: String? = nil, claims: String? = nil, key other: P256.Signing.PrivateKey? = nil) throws -> String {
            try FakeAPNsWebPushTests.jwt(
                header: header ?? #"{"alg":"ES256","kid":"\#(kid)"}"#, claims: claims ?? #"{"iss":"\#(iss)","iat":\#(now)}"#, key: other ?? key)
        }
    }

    static func apnsPush(_ fakes: FakeProviders, clock: ManualClock) throws -> (APNsPush, APNsContext) {
        let key = try P256.Signing.PrivateKey(pemRepresentation: fakes.apnsPrivateKeyPEM)
        let now = clock.now / 1000
        let token = try APNsProviderToken(teamID: FakeProviders.apnsTeamID, keyID: FakeProviders.apnsKeyID, privateKeyPEM: fakes.apnsPrivateKeyPEM)
        return (APNsPush(authorization: try token.current(now: now), now: now), APNsContext(key: key, now: now))
    }

    struct APNsRow: Sendable, CustomTestStringConvertible {
        var testDescription: String
        /// 200, or the refusal's status and Apple's reason.
        var status: Int
        var reason: String?
        var change: @Sendable (inout APNsPush, APNsContext) throws -> Void

        init(_ description: String, _ status: Int, _ reason: String? = nil, _ change: @escaping @Sendable (inout APNsPush, APNsContext) throws -> Void) {
            testDescription = description
            self.status = status
            self.reason = reason
            self.change = change
        }
    }

    static let dataOf4096: [UInt8] = {
        let head = #"{"aps":{"content-available":1},"d":""#
        return Array((head + String(repeating: "x", count: 4_096 - head.utf8.count - 2) + #""}"#).utf8)
    }()

    static let apnsRows: [APNsRow] = [
        // Accepted, at the edges.
        APNsRow("the well-formed background push", 200) { _, _ in },
        APNsRow("a body of exactly 4,096 bytes", 200) { push, _ in push.body = dataOf4096 },
        APNsRow("iat as a string of digits (APNSwift's encoding)", 200) { push, c in
            push.set("authorization", "bearer " + (try c.token(claims: #"{"iss":"\#(c.iss)","iat":"\#(c.now)"}"#)))
        },
        APNsRow("iat an hour old to the second", 200) { push, c in
            push.set("authorization", "bearer " + (try c.token(claims: #"{"iss":"\#(c.iss)","iat":\#(c.now - 3_600)}"#)))
        },
        APNsRow("a token of 200 upper-case hex digits, an apns-id, no apns-expiration", 200) { push, _ in
            push.token = String(repeating: "AB", count: 100)
            push.set("apns-id", "EABEAE54-14A8-11E5-B60B-1697F925EC7B")
            push.set("apns-expiration", nil)
        },
        // The provider token.
        APNsRow("no authorization", 403, "MissingProviderToken") { push, _ in push.set("authorization", nil) },
        APNsRow("authorization not bearer", 403, "InvalidProviderToken") { push, c in push.set("authorization", "basic " + (try c.token())) },
        APNsRow("a bearer that is not a JWT", 403, "InvalidProviderToken") { push, _ in push.set("authorization", "bearer not-a-jwt") },
        APNsRow("signed by another key", 403, "InvalidProviderToken") { push, c in
            push.set("authorization", "bearer " + (try c.token(key: P256.Signing.PrivateKey())))
        },
        APNsRow("alg ES384 in the header", 403, "InvalidProviderToken") { push, c in
            push.set("authorization", "bearer " + (try c.token(header: #"{"alg":"ES384","kid":"\#(c.kid)"}"#)))
        },
        APNsRow("another kid", 403, "InvalidProviderToken") { push, c in
            push.set("authorization", "bearer " + (try c.token(header: #"{"alg":"ES256","kid":"KEY9999999"}"#)))
        },
        APNsRow("another iss", 403, "InvalidProviderToken") { push, c in
            push.set("authorization", "bearer " + (try c.token(claims: #"{"iss":"TEAM999999","iat":\#(c.now)}"#)))
        },
        APNsRow("no iat", 403, "InvalidProviderToken") { push, c in
            push.set("authorization", "bearer " + (try c.token(claims: #"{"iss":"\#(c.iss)"}"#)))
        },
        APNsRow("iat an hour and a second old", 403, "ExpiredProviderToken") { push, c in
            push.set("authorization", "bearer " + (try c.token(claims: #"{"iss":"\#(c.iss)","iat":\#(c.now - 3_601)}"#)))
        },
        APNsRow("iat two minutes ahead", 403, "ExpiredProviderToken") { push, c in
            push.set("authorization", "bearer " + (try c.token(claims: #"{"iss":"\#(c.iss)","iat":\#(c.now + 120)}"#)))
        },
        // Headers.
        APNsRow("apns-topic twice", 400, "DuplicateHeaders") { push, _ in push.headers.append(("apns-topic", FakeProviders.apnsTopic)) },
        APNsRow("apns-id not a UUID", 400, "BadMessageId") { push, _ in push.set("apns-id", "not-a-uuid") },
        APNsRow("a token of 62 hex digits", 400, "BadDeviceToken") { push, _ in push.token = String(repeating: "ab", count: 31) },
        APNsRow("a token of 202 hex digits", 400, "BadDeviceToken") { push, _ in push.token = String(repeating: "ab", count: 101) },
        APNsRow("a token of 65 hex digits (odd)", 400, "BadDeviceToken") { push, _ in push.token = String(repeating: "ab", count: 32) + "a" },
        APNsRow("a token with a non-hex letter", 400, "BadDeviceToken") { push, _ in push.token = String(repeating: "ab", count: 31) + "ag" },
        APNsRow("no apns-topic", 400, "MissingTopic") { push, _ in push.set("apns-topic", nil) },
        APNsRow("another apns-topic", 400, "TopicDisallowed") { push, _ in push.set("apns-topic", "com.example.other") },
        APNsRow("no apns-push-type", 400, "InvalidPushType") { push, _ in push.set("apns-push-type", nil) },
        APNsRow("apns-push-type alert", 400, "InvalidPushType") { push, _ in push.set("apns-push-type", "alert") },
        APNsRow("apns-priority 10", 400, "BadPriority") { push, _ in push.set("apns-priority", "10") },
        APNsRow("no apns-priority (10 by default)", 400, "BadPriority") { push, _ in push.set("apns-priority", nil) },
        APNsRow("apns-expiration not an integer", 400, "BadExpirationDate") { push, _ in push.set("apns-expiration", "tomorrow") },
        APNsRow("apns-collapse-id of 65 bytes", 400, "BadCollapseId") { push, _ in push.set("apns-collapse-id", String(repeating: "c", count: 65)) },
        // The payload.
        APNsRow("a body of 4,097 bytes", 413, "PayloadTooLarge") { push, _ in push.body = dataOf4096 + [0x20] },
        APNsRow("an empty body", 400, "PayloadEmpty") { push, _ in push.body = [] },
        APNsRow("a body that is not JSON", 400, "PayloadEmpty") { push, _ in push.body = Array("aps".utf8) },
        APNsRow("no aps", 400, "PayloadEmpty") { push, _ in push.body = Array(#"{"t":"noData"}"#.utf8) },
        APNsRow("content-available 0", 400, "PayloadEmpty") { push, _ in push.body = Array(#"{"aps":{"content-available":0},"t":"noData"}"#.utf8) },
        APNsRow("aps with an alert", 400, "InvalidPushType") { push, _ in
            push.body = Array(#"{"aps":{"content-available":1,"alert":"hi"},"t":"noData"}"#.utf8)
        },
        APNsRow("aps with a badge", 400, "InvalidPushType") { push, _ in push.body = Array(#"{"aps":{"content-available":1,"badge":1}}"#.utf8) },
        APNsRow("aps with a sound", 400, "InvalidPushType") { push, _ in push.body = Array(#"{"aps":{"content-available":1,"sound":"a"}}"#.utf8) },
        APNsRow("a data value that is not a string", 400, "PayloadEmpty") { push, _ in
            push.body = Array(#"{"aps":{"content-available":1},"t":1}"#.utf8)
        },
    ]

    @Test("APNs: each check refuses with its status and Apple's recorded body; the edges are accepted and recorded", arguments: apnsRows)
    func apnsChecks(_ row: APNsRow) async throws {
        try await Self.withFakes { fakes, transport, clock in
            var (push, context) = try Self.apnsPush(fakes, clock: clock)
            try row.change(&push, context)
            let answer = try await Self.send(transport, push.request(fakes))
            #expect(answer.status == row.status)
            let received = try #require(fakes.received(provider: "apns").last)
            #expect(received.status == row.status)
            #expect(received.target == push.token)
            #expect(received.data == push.body)
            if let reason = row.reason {
                #expect(Self.reason(answer) == reason, "\(String(decoding: answer.body, as: UTF8.self))")
                let name = "apns-" + reason.replacing(#/[A-Z]/#) { "-" + $0.output.lowercased() }.dropFirst()
                #expect(answer.body == ProviderFixtures.answer(String(name)).body, "fixtures/providers/\(name).json")
            } else {
                #expect(answer.body.isEmpty)
            }
        }
    }

    @Test("APNs: a token newer than the team's by 5 minutes is TooManyProviderTokenUpdates; the current one still works; 20 minutes on, the new one does")
    func apnsTokenUpdates() async throws {
        try await Self.withFakes { fakes, transport, clock in
            let (push, context) = try Self.apnsPush(fakes, clock: clock)
            #expect(try await Self.send(transport, push.request(fakes)).status == 200)
            clock.advance(by: .seconds(300))
            var renewed = push
            renewed.set("authorization", "bearer " + (try context.token(claims: #"{"iss":"\#(context.iss)","iat":\#(context.now + 300)}"#)))
            let refused = try await Self.send(transport, renewed.request(fakes))
            #expect(refused.status == 429)
            #expect(Self.reason(refused) == "TooManyProviderTokenUpdates")
            #expect(refused.body == ProviderFixtures.answer("apns-too-many-provider-token-updates").body)
            #expect(try await Self.send(transport, push.request(fakes)).status == 200)
            // 20 minutes after the first token's iat: a newer token becomes the current one …
            clock.advance(by: .seconds(900))
            var later = push
            later.set("authorization", "bearer " + (try context.token(claims: #"{"iss":"\#(context.iss)","iat":\#(context.now + 1_200)}"#)))
            #expect(try await Self.send(transport, later.request(fakes)).status == 200)
            // … and the one made 5 minutes in is now older than it: accepted, changing nothing.
            #expect(try await Self.send(transport, renewed.request(fakes)).status == 200)
            // An hour after the first: it has expired.
            clock.advance(by: .seconds(2_401))
            let expired = try await Self.send(transport, push.request(fakes))
            #expect(expired.status == 403)
            #expect(Self.reason(expired) == "ExpiredProviderToken")
            #expect(try await Self.send(transport, later.request(fakes)).status == 200)
        }
    }

    /// The answers only scripts give, what each means to the classifier.
    static let apnsScripted: [(name: String, status: Int, outcome: String)] = [
        ("apns-device-token-not-for-topic", 400, "revokeDeadToken"), ("apns-bad-device-token", 400, "revokeDeadToken"),
        ("apns-topic-disallowed", 400, "pause"), ("apns-bad-priority", 400, "failed"), ("apns-expired-provider-token", 403, "refreshCredentials"),
        ("apns-invalid-provider-token", 403, "pause"), ("apns-unrelated-key-id-in-token", 403, "retry"), ("apns-bad-path", 404, "pause"),
        ("apns-unregistered", 410, "revokeDeadToken"), ("apns-expired-token", 410, "revokeDeadToken"), ("apns-payload-too-large", 413, "failed"),
        ("apns-too-many-requests", 429, "retry"), ("apns-too-many-provider-token-updates", 429, "retry"),
        ("apns-internal-server-error", 500, "retry"), ("apns-service-unavailable", 503, "retry"),
    ]

    @Test("APNs: a device token's script answers its recorded answers in order (each classified as the reference says), then 200")
    func apnsScripts() async throws {
        try await Self.withFakes { fakes, transport, clock in
            let (push, _) = try Self.apnsPush(fakes, clock: clock)
            fakes.script(push.token, Self.apnsScripted.map { .recorded($0.name) })
            for expected in Self.apnsScripted {
                let answer = try await Self.send(transport, push.request(fakes))
                #expect(answer.status == expected.status, "\(expected.name)")
                #expect(answer.body == ProviderFixtures.answer(expected.name).body, "\(expected.name)")
                #expect("\(AnswerClassifier.apns(answer, now: clock.now))".hasPrefix(expected.outcome), "\(expected.name)")
            }
            let unregistered = try JSONParser.parse(ProviderFixtures.answer("apns-unregistered").body)
            #expect(unregistered["timestamp"]?.integerValue != nil)
            #expect(try await Self.send(transport, push.request(fakes)).status == 200)
            #expect(fakes.received(provider: "apns").map(\.status) == Self.apnsScripted.map(\.status) + [200])
        }
    }

    /// A client that shows the answer's headers (the transport keeps only `Retry-After`).
    static func rawPost(_ url: String, headers: [(String, String)], body: [UInt8]) async throws -> (status: Int, headers: [String: String]) {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(ca))]
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.httpVersion = .automatic
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        do {
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            request.body = .bytes(ByteBuffer(bytes: body))
            let response = try await client.execute(request, timeout: .seconds(10))
            _ = try await response.body.collect(upTo: 1 << 16)
            var fields: [String: String] = [:]
            for field in response.headers { fields[field.name.lowercased()] = field.value }
            try await client.shutdown()
            return (Int(response.status.code), fields)
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    @Test("APNs: every answer carries apns-id: the one sent, echoed (on a refusal too), or a new UUID")
    func apnsID() async throws {
        try await Self.withFakes { fakes, _, clock in
            var (push, _) = try Self.apnsPush(fakes, clock: clock)
            let url = fakes.apnsEndpoint + "/3/device/" + push.token
            let created = try await Self.rawPost(url, headers: push.headers, body: push.body)
            #expect(created.status == 200)
            #expect(FakeProviders.isCanonicalUUID(created.headers["apns-id"] ?? ""), "\(created.headers)")
            push.set("apns-id", "eabeae54-14a8-11e5-b60b-1697f925ec7b")
            let echoed = try await Self.rawPost(url, headers: push.headers, body: push.body)
            #expect(echoed.status == 200)
            #expect(echoed.headers["apns-id"] == "eabeae54-14a8-11e5-b60b-1697f925ec7b")
            push.set("apns-topic", "com.example.other")
            let refused = try await Self.rawPost(url, headers: push.headers, body: push.body)
            #expect(refused.status == 400)
            #expect(refused.headers["apns-id"] == "eabeae54-14a8-11e5-b60b-1697f925ec7b")
            #expect(fakes.received(provider: "apns").first?.headers["apns-topic"] == FakeProviders.apnsTopic)
        }
    }

    // MARK: - Web Push

    static let plaintext = Array(#"{"s":"OK","t":"value","app":"toto","sp":"/p","d":"{\"é\":1}"}"#.utf8)

    /// A push to a subscription of the fake, well formed until a row changes it.
    struct WebPushRequest: Sendable {
        var name: String
        var url: String
        var headers: [(String, String)]
        var body: [UInt8]

        mutating func set(_ name: String, _ value: String?) {
            headers.removeAll { $0.0.lowercased() == name.lowercased() }
            if let value { headers.append((name, value)) }
        }
    }

    /// What a row may use.
    struct WebPushContext: Sendable {
        var fakes: FakeProviders
        var subscriber: WebPushSubscriberKeys
        var vapid: VAPIDKey
        var now: Int64

        func authorization(audience: String? = nil, expiresAt: Int64? = nil, subject: String = "mailto:ops@example.com") throws -> String {
            try vapid.authorization(audience: audience ?? fakes.webPushOrigin, expiresAt: expiresAt ?? now + 3_600, subject: subject)
        }
    }

    static func webPush(_ fakes: FakeProviders, clock: ManualClock, name: String = "browser-1") throws -> (WebPushRequest, WebPushContext) {
        let subscription = try JSONParser.parse(Array(fakes.webPushSubscription(name).utf8))
        let subscriber = try WebPushSubscriberKeys(
            p256dh: try #require(subscription["keys"]?["p256dh"]?.stringValue), auth: try #require(subscription["keys"]?["auth"]?.stringValue))
        let context = WebPushContext(fakes: fakes, subscriber: subscriber, vapid: VAPIDKey(privateKey: P256.Signing.PrivateKey()), now: clock.now / 1000)
        let request = WebPushRequest(
            name: name, url: try #require(subscription["endpoint"]?.stringValue),
            headers: [
                ("authorization", try context.authorization()), ("ttl", "60"), ("urgency", "high"), ("content-encoding", "aes128gcm"),
                ("content-type", "application/octet-stream"),
            ],
            body: try WebPushEncryption.encrypt(plaintext, for: subscriber))
        return (request, context)
    }

    struct WebPushRow: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var status: Int
        /// The recorded answer expected (`webpush-…`).
        var answer: String
        var change: @Sendable (inout WebPushRequest, WebPushContext) throws -> Void

        init(_ description: String, _ answer: String, _ change: @escaping @Sendable (inout WebPushRequest, WebPushContext) throws -> Void) {
            testDescription = description
            self.answer = answer
            status = ProviderFixtures.answer(answer).status
            self.change = change
        }
    }

    /// A body encrypted with `delimiter` after the plaintext (the last record's is 0x02).
    static func sealed(_ plaintext: [UInt8], for subscriber: WebPushSubscriberKeys, delimiter: UInt8) throws -> [UInt8] {
        let sender = P256.KeyAgreement.PrivateKey()
        let salt = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let senderPublic = [UInt8](sender.publicKey.x963Representation)
        let (key, nonce) = try WebPushEncryption.derive(
            privateKey: sender, peer: subscriber.publicKey, authSecret: subscriber.authSecret, salt: salt,
            subscriberPublic: [UInt8](subscriber.publicKey.x963Representation), senderPublic: senderPublic)
        let box = try AES.GCM.seal(plaintext + [delimiter], using: key, nonce: nonce)
        return salt + [0, 0, 0x10, 0, 65] + senderPublic + box.ciphertext + box.tag
    }

    static let webPushRows: [WebPushRow] = [
        // Accepted, at the edges.
        WebPushRow("the well-formed push", "webpush-created") { _, _ in },
        WebPushRow("`,k=` without a space, TTL 0, no Urgency, a Topic of 32 characters", "webpush-created") { push, c in
            push.set("authorization", (try c.authorization()).replacingOccurrences(of: ", k=", with: ",k="))
            push.set("ttl", "0")
            push.set("urgency", nil)
            push.set("topic", String(repeating: "a_-Z", count: 8))
        },
        WebPushRow("exp exactly 24 hours ahead, sub an https: URL", "webpush-created") { push, c in
            push.set("authorization", try c.authorization(expiresAt: c.now + 86_400, subject: "https://example.com/contact"))
        },
        WebPushRow("the VAPID key the subscription was made under", "webpush-created") { _, c in c.fakes.setWebPushVAPIDKey(c.vapid.publicKeyText) },
        // Subscription.
        WebPushRow("an unknown subscription", "webpush-not-found") { push, _ in push.url = push.url.replacingOccurrences(of: "browser-1", with: "nobody") },
        WebPushRow("a removed subscription", "webpush-not-found") { push, c in c.fakes.removeWebPushSubscription(push.name) },
        // VAPID.
        WebPushRow("no Authorization", "webpush-unauthorized") { push, _ in push.set("authorization", nil) },
        WebPushRow("the WebPush scheme of the drafts", "webpush-unauthorized") { push, c in
            push.set("authorization", "WebPush " + (try c.vapid.token(audience: c.fakes.webPushOrigin, expiresAt: c.now + 60, subject: "mailto:a@example.com")))
        },
        WebPushRow("no k=", "webpush-bad-jwt") { push, c in
            push.set("authorization", "vapid t=" + (try c.vapid.token(audience: c.fakes.webPushOrigin, expiresAt: c.now + 60, subject: "mailto:a@example.com")))
        },
        WebPushRow("k not a P-256 point", "webpush-bad-jwt") { push, c in
            push.set("authorization", (try c.authorization()).replacingOccurrences(of: "k=" + c.vapid.publicKeyText, with: "k=AAAA"))
        },
        WebPushRow("signed by another key than k", "webpush-bad-jwt") { push, c in
            let other = VAPIDKey(privateKey: P256.Signing.PrivateKey())
            push.set("authorization", (try c.authorization()).replacingOccurrences(of: c.vapid.publicKeyText, with: other.publicKeyText))
        },
        WebPushRow("alg ES384 in the JWT header", "webpush-bad-jwt") { push, c in
            let token = try FakeAPNsWebPushTests.jwt(
                header: #"{"typ":"JWT","alg":"ES384"}"#, claims: #"{"aud":"\#(c.fakes.webPushOrigin)","exp":\#(c.now + 60),"sub":"mailto:a@example.com"}"#,
                key: c.vapid.privateKey)
            push.set("authorization", "vapid t=\(token), k=\(c.vapid.publicKeyText)")
        },
        WebPushRow("aud another origin", "webpush-bad-jwt") { push, c in push.set("authorization", try c.authorization(audience: "https://push.example.net")) },
        WebPushRow("aud the origin with a path", "webpush-bad-jwt") { push, c in push.set("authorization", try c.authorization(audience: c.fakes.webPushOrigin + "/")) },
        WebPushRow("exp passed", "webpush-bad-jwt") { push, c in push.set("authorization", try c.authorization(expiresAt: c.now)) },
        WebPushRow("exp 24 hours and a second ahead", "webpush-bad-jwt") { push, c in push.set("authorization", try c.authorization(expiresAt: c.now + 86_401)) },
        WebPushRow("sub neither mailto: nor https:", "webpush-bad-jwt") { push, c in push.set("authorization", try c.authorization(subject: "ops@example.com")) },
        WebPushRow("sub `mailto: <ops@example.com>`", "webpush-bad-jwt") { push, c in
            push.set("authorization", try c.authorization(subject: "mailto: <ops@example.com>"))
        },
        WebPushRow("sub at localhost", "webpush-bad-jwt") { push, c in push.set("authorization", try c.authorization(subject: "mailto:admin@localhost")) },
        WebPushRow("a VAPID key other than the subscription's", "webpush-bad-jwt") { _, c in
            c.fakes.setWebPushVAPIDKey(VAPIDKey(privateKey: P256.Signing.PrivateKey()).publicKeyText)
        },
        // RFC 8030 headers.
        WebPushRow("no TTL", "webpush-missing-ttl") { push, _ in push.set("ttl", nil) },
        WebPushRow("TTL -1", "webpush-missing-ttl") { push, _ in push.set("ttl", "-1") },
        WebPushRow("TTL not a number", "webpush-missing-ttl") { push, _ in push.set("ttl", "soon") },
        WebPushRow("TTL twice", "webpush-missing-ttl") { push, _ in push.headers.append(("ttl", "60")) },
        WebPushRow("Urgency urgent", "webpush-bad-urgency") { push, _ in push.set("urgency", "urgent") },
        WebPushRow("Urgency twice", "webpush-bad-urgency") { push, _ in push.headers.append(("urgency", "low")) },
        WebPushRow("a Topic of 33 characters", "webpush-bad-topic") { push, _ in push.set("topic", String(repeating: "a", count: 33)) },
        WebPushRow("a Topic outside base64url", "webpush-bad-topic") { push, _ in push.set("topic", "a+b") },
        WebPushRow("Content-Encoding aesgcm", "webpush-bad-encoding") { push, _ in push.set("content-encoding", "aesgcm") },
        WebPushRow("no Content-Encoding", "webpush-bad-encoding") { push, _ in push.set("content-encoding", nil) },
        // The body.
        WebPushRow("a body of 4,097 bytes", "webpush-too-large") { push, _ in push.body = [UInt8](repeating: 7, count: 4_097) },
        WebPushRow("encrypted for another subscriber", "webpush-undecryptable") { push, _ in
            let other = P256.KeyAgreement.PrivateKey()
            push.body = try WebPushEncryption.encrypt(plaintext, for: WebPushSubscriberKeys(publicKey: other.publicKey, authSecret: Array(repeating: 1, count: 16)))
        },
        WebPushRow("a byte of the ciphertext flipped", "webpush-undecryptable") { push, _ in push.body[100] ^= 0x01 },
        WebPushRow("a record size below the record's length", "webpush-undecryptable") { push, _ in
            push.body[16...19] = [0, 0, 0, 32]
        },
        WebPushRow("a key id of 64 bytes", "webpush-undecryptable") { push, _ in push.body[20] = 64 },
        WebPushRow("the delimiter of a record that is not the last (0x01)", "webpush-undecryptable") { push, c in
            push.body = try FakeAPNsWebPushTests.sealed(plaintext, for: c.subscriber, delimiter: 0x01)
        },
        WebPushRow("no body", "webpush-undecryptable") { push, _ in push.body = [] },
    ]

    @Test("Web Push: each check refuses with its recorded answer; the edges are accepted and the plaintext recorded", arguments: webPushRows)
    func webPushChecks(_ row: WebPushRow) async throws {
        try await Self.withFakes { fakes, transport, clock in
            var (push, context) = try Self.webPush(fakes, clock: clock)
            try row.change(&push, context)
            let answer = try await Self.send(transport, OutgoingRequest(url: push.url, headers: push.headers, body: push.body))
            #expect(answer.status == row.status)
            #expect(answer.body == ProviderFixtures.answer(row.answer).body, "\(String(decoding: answer.body, as: UTF8.self))")
            let received = try #require(fakes.received(provider: "webpush").last)
            #expect(received.status == row.status)
            #expect(received.raw == push.body)
            #expect(received.data == (row.status == 201 ? Self.plaintext : []))
        }
    }

    @Test("Web Push: a push made by WebPushEncryption and VAPIDKey is 201 with Location and TTL; the fake's secrets decrypt what it received")
    func webPushDelivered() async throws {
        try await Self.withFakes { fakes, transport, clock in
            let (push, _) = try Self.webPush(fakes, clock: clock)
            #expect(push.url == fakes.webPushOrigin + "/push/browser-1")
            let answer = try await Self.send(transport, OutgoingRequest(url: push.url, headers: push.headers, body: push.body))
            #expect(answer.status == 201)
            let raw = try await Self.rawPost(push.url, headers: push.headers, body: push.body)
            #expect(raw.status == 201)
            #expect(raw.headers["location"] == "/message/2")
            #expect(raw.headers["ttl"] == "60")
            var long = push
            long.set("ttl", "99999999999999999999999")
            #expect(try await Self.rawPost(push.url, headers: long.headers, body: push.body).headers["ttl"] == "5184000")
            let received = fakes.received(provider: "webpush")
            #expect(received.map(\.status) == [201, 201, 201])
            #expect(received.allSatisfy { $0.target == "browser-1" && $0.data == Self.plaintext && $0.raw == push.body })
            let secrets = try #require(fakes.webPushSubscriberSecrets("browser-1"))
            let key = try P256.KeyAgreement.PrivateKey(rawRepresentation: try #require(Base64URL.decode(secrets.privateKey)))
            #expect(try WebPushEncryption.decrypt(received[0].raw, privateKey: key, authSecret: try #require(Base64URL.decode(secrets.auth))) == Self.plaintext)
            #expect(fakes.webPushSubscriberSecrets("nobody") == nil)
        }
    }

    @Test("Web Push: http_ece decrypts what the fake received with the secrets it gives")
    func webPushSecretsForPython() async throws {
        try PythonPackages.require("http_ece", package: "http-ece")
        try await Self.withFakes { fakes, transport, clock in
            let (push, _) = try Self.webPush(fakes, clock: clock)
            #expect(try await Self.send(transport, OutgoingRequest(url: push.url, headers: push.headers, body: push.body)).status == 201)
            let secrets = try #require(fakes.webPushSubscriberSecrets("browser-1"))
            let raw = try #require(fakes.received(provider: "webpush").last?.raw)
            let script = """
                import base64, sys
                import http_ece
                from cryptography.hazmat.primitives.asymmetric import ec
                def b(t): return base64.urlsafe_b64decode(t + "=" * (-len(t) % 4))
                private = ec.derive_private_key(int.from_bytes(b(sys.argv[1]), "big"), ec.SECP256R1())
                print(http_ece.decrypt(b(sys.argv[3]), private_key=private, auth_secret=b(sys.argv[2]), version="aes128gcm").hex())
                """
            let process = TestProcesses.make(command: "python3", ["-c", script, secrets.privateKey, secrets.auth, Base64URL.encodeToString(raw)])
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            try TestProcesses.launch(process)
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(text.trimmingCharacters(in: .whitespacesAndNewlines) == Self.plaintext.map { String(format: "%02x", $0) }.joined(), "\(text)")
        }
    }

    @Test("Web Push: a subscription's script answers its recorded answers in order (Retry-After kept), then 201")
    func webPushScripts() async throws {
        let scripted: [(name: String, status: Int, retryAfter: String?)] = [
            ("webpush-gone", 410, nil), ("webpush-not-found", 404, nil), ("webpush-too-large", 413, nil), ("webpush-rate-limited", 429, "120"),
            ("webpush-bad-jwt", 403, nil), ("webpush-server-error", 500, nil), ("webpush-unavailable", 503, "120"), ("webpush-created", 201, nil),
        ]
        try await Self.withFakes { fakes, transport, clock in
            let (push, _) = try Self.webPush(fakes, clock: clock)
            fakes.script(push.name, scripted.map { .recorded($0.name) })
            for expected in scripted {
                let answer = try await Self.send(transport, OutgoingRequest(url: push.url, headers: push.headers, body: push.body))
                #expect(answer.status == expected.status, "\(expected.name)")
                #expect(answer.retryAfter == expected.retryAfter, "\(expected.name)")
                #expect(answer.body == ProviderFixtures.answer(expected.name).body, "\(expected.name)")
            }
            #expect(try await Self.send(transport, OutgoingRequest(url: push.url, headers: push.headers, body: push.body)).status == 201)
            let received = fakes.received(provider: "webpush")
            #expect(received.map(\.status) == scripted.map(\.status) + [201])
            #expect(received.allSatisfy { $0.data == Self.plaintext })
        }
    }

    @Test("Web Push: the fake's own decryption reads RFC 8291 Appendix A")
    func appendixA() {
        func bytes(_ text: String) -> [UInt8] { Base64URL.decode(text)! }
        let body = bytes(
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
        )
        let plaintext = FakeProviders.decryptWebPush(
            body, privateKey: bytes("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"), authSecret: bytes("BTBZMqHH6r4Tts7J_aSIgg"))
        #expect(plaintext == Array("When I grow up, I want to be a watermelon".utf8))
        #expect(FakeProviders.decryptWebPush(body, privateKey: bytes("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"), authSecret: Array(repeating: 0, count: 16)) == nil)
    }
}
