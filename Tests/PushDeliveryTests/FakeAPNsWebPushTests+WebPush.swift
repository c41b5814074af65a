import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOSSL
import PushCore
import PushJSON
@testable import PushDelivery
import PushHTTP
import PushJOSE
@testable import PushFakes
import PushTestSupport
import Testing

/// The fake Web Push push service.
extension FakeAPNsWebPushTests {
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
            let text = try TestProcesses.output(process)
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
