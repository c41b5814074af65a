import Crypto
import Foundation
import PushCore
import PushJSON
import PushDispatchClient
import PushJOSE
import PushTestSupport
import Testing

/// What the library believes: forged notifications refused as `pushdispatch decode` refuses
/// them, the service's keys fetched again for a new `kid`, webhook requests verified.
@Suite("The app library refuses forgeries and verifies webhooks against pushdispatch run", .processLevel, .serialized)
struct ClientLibraryTrustTests {
    /// What the reading of `data` threw.
    static func refusal(_ push: PushDispatch, _ data: [String: String]) async -> NotificationError? {
        do {
            _ = try await push.notification(from: data)
            return nil
        } catch {
            return error
        }
    }

    static func compact(_ json: JSON) -> [UInt8] {
        var writer = JSONWriter()
        writer.write(json)
        return writer.bytes
    }

    @Test("altered, re-signed, unsigned, unknown-key, alg none, extra-field and other-application notifications are refused")
    func forgeries() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        let push = try harness.client(device: try .fcm("trust-device"), refetchInterval: .zero)
        try await push.node(for: "/f/signed").subscribeThroughNotifications(descriptor: .init(mode: .value))
        let other = try harness.client(app: "other", device: try .fcm("other-device"))
        try await other.node(for: "/f/signed").subscribeThroughNotifications(descriptor: .init(mode: .value))
        try harness.write([("toto", "put", "/f/signed", #"{"amount":10}"#), ("other", "put", "/f/signed", #"{"amount":10}"#)])
        let genuine = try await harness.fcmData("trust-device", count: 1)[0]
        #expect(try await push.notification(from: genuine).event == .value(["amount": 10]))
        let token = try #require(genuine["evt"]).split(separator: ".").map(String.init)

        // The event altered under the service's signature.
        let altered = Base64URL.encodeToString(Array(#"{"t":"v","m":"value","a":"toto","p":"/f/signed","s":"OK","v":{"amount":1000}}"#.utf8))
        var forged = genuine
        forged["evt"] = [token[0], altered, token[2]].joined(separator: ".")
        #expect(await Self.refusal(push, forged)?.code == .badSignature)

        // Signed by someone else's key under the service key's kid.
        let stranger = P256.Signing.PrivateKey()
        let impostor = JWK(material: .ecP256(public: stranger.publicKey, private: stranger), kid: "sig-es", use: "sig", alg: "ES256")
        let event = Array(#"{"t":"v","m":"value","a":"toto","p":"/f/signed","s":"OK","v":{"amount":1000}}"#.utf8)
        forged["evt"] = String(decoding: try JWSSigner(key: impostor).sign(event), as: UTF8.self)
        #expect(await Self.refusal(push, forged)?.code == .badSignature)

        // A key of its own, whose kid the service does not publish (fetched again, still unknown).
        let unknown = impostor.with(kid: "attacker-1")
        forged["evt"] = String(decoding: try JWSSigner(key: unknown).sign(event), as: UTF8.self)
        let refusal = await Self.refusal(push, forged)
        #expect(refusal?.code == .unknownKey && refusal?.message.contains("attacker-1") == true, "\(String(describing: refusal))")

        // alg none.
        let none = Base64URL.encodeToString(Array(#"{"alg":"none","kid":"sig-es"}"#.utf8)) + "." + Base64URL.encodeToString(event) + "."
        forged["evt"] = none
        #expect(await Self.refusal(push, forged)?.code == .unsupportedAlgorithm)

        // Anyone may encrypt to the device's public key: an unsigned event inside is refused…
        let devicePublic = try await push.devicePublicKey()
        let toDevice = try JWEEncrypter(keyAlgorithm: .ecdhES, contentAlgorithm: .a256gcm, key: devicePublic)
        let kid = try #require(devicePublic.kid)
        let sealed: [String: String] = ["srv": "webcom", "kid": kid, "evt": String(decoding: try toDevice.encrypt(event), as: UTF8.self), "ver": "v2"]
        let unsigned = await Self.refusal(push, sealed)
        #expect(unsigned?.code == .malformed && unsigned?.message.contains("signed JWS") == true, "\(String(describing: unsigned))")
        // …and so is one signed by a stranger (cty JWT, as the service writes it).
        let nested = try JWEEncrypter(keyAlgorithm: .ecdhES, contentAlgorithm: .a256gcm, key: devicePublic, contentType: "JWT")
        let strangerSigned = try nested.encrypt(try JWSSigner(key: unknown).sign(event))
        #expect(await Self.refusal(push, ["srv": "webcom", "kid": kid, "evt": String(decoding: strangerSigned, as: UTF8.self), "ver": "v2"])?.code == .unknownKey)

        // A field the service never writes.
        var extra = genuine
        extra["note"] = "hello"
        #expect(await Self.refusal(push, extra)?.code == .malformed)

        // A genuine, well-signed notification of another application on the same service.
        let otherData = try await harness.fcmData("other-device", count: 1)[0]
        #expect(try await other.notification(from: otherData).app == "other")
        #expect(await Self.refusal(push, otherData)?.code == .otherApplication)
    }

    @Test("a kid the cached keys lack makes the library fetch the service's keys again, and the notification reads")
    func newSigningKey() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        let push = try harness.client(device: try .fcm("rotation-device"), refetchInterval: .zero)
        try await push.node(for: "/r").subscribeThroughNotifications(descriptor: .init(mode: .value))
        try harness.write([("toto", "put", "/r", "1")])
        #expect(try await push.notification(from: try await harness.fcmData("rotation-device", count: 1)[0]).event == .value(1))

        // The application now signs with its EdDSA key: a kid the cached set lacks.
        try await harness.restart(signingKey: "sig-ed")
        try harness.write([("toto", "put", "/r", "2")])
        let second = try await harness.fcmData("rotation-device", count: 2)[1]
        let evt = try #require(second["evt"])
        let header = try JSONParser.parse(Base64URL.decode(String(evt.prefix { $0 != "." })) ?? [])
        #expect(header["kid"] == "sig-ed")
        #expect(try await push.notification(from: second).event == .value(2))
    }

    @Test("a webhook delivery is verified with the secret and read; altered, stale or wrongly signed requests are refused")
    func webhook() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        let push = try harness.client(device: nil)
        let subscription = try await push.node(for: "/w/orders").subscribeThroughWebhook("orders", context: "crm-7", descriptor: .init(mode: .childEvent))
        #expect(subscription.target == .webhook(name: "orders", context: "crm-7"))
        try harness.write([("toto", "patch", "/w/orders", #"{"o1":{"total":12.5},"o2":null}"#)])
        try await ServiceEndToEndTests.eventually("the webhook") { harness.fakes.received(provider: "webhook").contains { $0.status == 200 } }
        let request = try #require(harness.fakes.received(provider: "webhook").first)

        let receiver = try WebhookReceiver(secret: ClientLibraryHarness.webhookSecret, app: "toto")
        let delivery = try receiver.notification(headers: request.headers, body: request.data)
        #expect(delivery.subscriptionID == subscription.id && delivery.uid == "alice" && delivery.context == "crm-7")
        #expect(delivery.messageID == request.headers["webhook-id"])
        #expect(delivery.notification.event == .childEvent(ChildChanges(added: ["o1": ["total": 12.5]], changed: [:], removed: [])))
        #expect(delivery.notification.protection == .webhookSignature && delivery.notification.path == "/w/orders")

        var body = request.data
        body[body.count - 3] ^= 1
        #expect(throws: NotificationError(.badWebhookSignature, "")) { try receiver.notification(headers: request.headers, body: body) }
        #expect(throws: NotificationError(.staleWebhook, "")) {
            try receiver.notification(headers: request.headers, body: request.data, now: Date().addingTimeInterval(600))
        }
        let stranger = try WebhookReceiver(secret: "whsec_" + Data(repeating: 7, count: 24).base64EncodedString(), app: "toto")
        #expect(throws: NotificationError(.badWebhookSignature, "")) { try stranger.notification(headers: request.headers, body: request.data) }
        var unsigned = request.headers
        unsigned["webhook-signature"] = nil
        #expect(throws: NotificationError(.malformed, "")) { try receiver.notification(headers: unsigned, body: request.data) }
        let otherApp = try WebhookReceiver(secret: ClientLibraryHarness.webhookSecret, app: "other")
        #expect(throws: NotificationError(.otherApplication, "")) { try otherApp.notification(headers: request.headers, body: request.data) }
    }
}
