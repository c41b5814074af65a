import Foundation
import PushCore
import PushJSON
import PushDelivery
import PushDispatchClient
import PushTestSupport
import Testing

/// Webhook requests as the service's sender signs them (PushDelivery's `WebhookSecret` and
/// `ProviderMessages.webhook`), checked and read by the library.
@Suite("Webhook requests are verified and read")
struct WebhookReceiverTests {
    static let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// A request as the service sends it: the §8 body of `event`, signed at `now`.
    static func request(
        _ event: Event, status: PayloadStatus = .ok, id: String = "msg_1_7", timestamp: Int64 = 1_800_000_000, context: String? = "crm"
    ) throws -> (headers: [String: String], body: [UInt8]) {
        var stored = JSONWriter()
        stored.raw(#"{"app":"toto","uid":"alice","subscription":"0123456789abcdef0123456789abcdef","path":"#)
        stored.writeString(event.path)
        stored.raw(#","context":"#)
        if let context { stored.writeString(context) } else { stored.raw("null") }
        stored.raw(#","event":"#)
        EventWriter.write(event, status: status, into: &stored)
        stored.raw("}")
        let body = ProviderMessages.webhook(id: id, storedBody: stored.bytes)
        let signature = try WebhookSecret(secret).signature(id: id, timestamp: timestamp, body: body)
        return (["Webhook-Id": id, "webhook-timestamp": String(timestamp), "webhook-signature": signature, "content-type": "application/json"], body)
    }

    @Test("a signed request reads as its event, with its envelope")
    func reads() throws {
        let receiver = try WebhookReceiver(secret: Self.secret, app: "toto")
        let event = Event(app: "toto", path: "/orders", body: .childEvent(ChildDiff(before: ["a": 1], after: ["b": 2])))
        let (headers, body) = try Self.request(event)
        let delivery = try receiver.notification(headers: headers, body: body, now: Self.now.addingTimeInterval(299))
        #expect(delivery.messageID == "msg_1_7" && delivery.uid == "alice" && delivery.context == "crm")
        #expect(delivery.subscriptionID == "0123456789abcdef0123456789abcdef" && delivery.sentAt == Self.now)
        #expect(delivery.notification.event == .childEvent(ChildChanges(added: ["b": 2], changed: [:], removed: ["a"])))
        #expect(delivery.notification.protection == .webhookSignature && delivery.notification.status == .ok)
        // Several signatures (a secret being rotated): one that verifies is enough.
        var rotated = headers
        rotated["webhook-signature"] = "v1,AAAA v1a,xyz " + headers["webhook-signature"]!
        #expect(try receiver.notification(headers: rotated, body: body, now: Self.now).messageID == "msg_1_7")
        let noContext = try Self.request(Event(app: "toto", path: "/", body: .noData), context: nil)
        #expect(try receiver.notification(headers: noContext.headers, body: noContext.body, now: Self.now).context == nil)
    }

    @Test(
        "a request that does not verify, is stale, or is not the service's is refused",
        arguments: [
            "body altered", "wrong secret", "too old", "from the future", "no signature", "header twice", "id differs", "timestamp not digits",
            "another application", "path differs", "huge timestamp", "too large",
        ])
    func refused(case name: String) throws {
        var receiver = try WebhookReceiver(secret: Self.secret, app: "toto")
        let event = Event(app: "toto", path: "/orders", body: .value(["total": 3]))
        var (headers, body) = try Self.request(event)
        var now = Self.now
        var expected = NotificationError.Code.badWebhookSignature
        switch name {
        case "body altered": body[body.count - 5] ^= 0x01
        case "wrong secret": receiver = try WebhookReceiver(secret: "whsec_" + Data(repeating: 1, count: 32).base64EncodedString(), app: "toto")
        case "too old": now = Self.now.addingTimeInterval(301); expected = .staleWebhook
        case "from the future": now = Self.now.addingTimeInterval(-301); expected = .staleWebhook
        case "no signature": headers["webhook-signature"] = nil; expected = .malformed
        case "header twice": headers["webhook-id"] = "msg_1_7"; expected = .malformed
        case "id differs":
            (headers, body) = try Self.request(event, id: "msg_2")
            body = Array(String(decoding: body, as: UTF8.self).replacingOccurrences(of: "msg_2", with: "msg_3").utf8)
            headers["webhook-signature"] = try WebhookSecret(Self.secret).signature(id: "msg_2", timestamp: 1_800_000_000, body: body)
            expected = .malformed
        case "timestamp not digits": headers["webhook-timestamp"] = "+1800000000"; expected = .malformed
        case "another application": receiver = try WebhookReceiver(secret: Self.secret, app: "titi"); expected = .otherApplication
        case "path differs":
            body = Array(String(decoding: body, as: UTF8.self).replacingOccurrences(of: #""path":"/orders""#, with: #""path":"/other""#).utf8)
            headers["webhook-signature"] = try WebhookSecret(Self.secret).signature(id: "msg_1_7", timestamp: 1_800_000_000, body: body)
            expected = .malformed
        case "huge timestamp":
            (headers, body) = try Self.request(event, timestamp: 999_999_999_999)
            expected = .staleWebhook
        default:
            receiver = try WebhookReceiver(secret: Self.secret, app: "toto", maxBodyBytes: 64)
            expected = .tooLarge
        }
        #expect(throws: NotificationError(expected, "")) { try receiver.notification(headers: headers, body: body, now: now) }
    }

    @Test("a secret that is not whsec_ and 16 bytes of base64 is refused without being echoed")
    func badSecret() {
        for secret in ["", "whsec_", "whsec_c2hvcnQ=", "not base64 !!! secret-value"] {
            #expect {
                try WebhookReceiver(secret: secret, app: "toto")
            } throws: { error in
                !"\(error)".contains("secret-value") && (error as? NotificationError)?.code == .malformed
            }
        }
    }
}
