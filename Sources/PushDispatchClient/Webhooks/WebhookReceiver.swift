import Foundation
import PushCore

/// Checks and reads the webhook requests of the service (SPEC §8): the Standard Webhooks
/// signature (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>`)
/// with the webhook's secret and a timestamp within ``tolerance`` of now, then the body
/// `{"id","app","uid","subscription","path","context","event"}` into a
/// ``WebhookNotification``.
///
/// ```swift
/// let receiver = try WebhookReceiver(secret: secretFromConfiguration, app: "toto")
/// let delivery = try receiver.notification(headers: request.headers, body: request.body)
/// ```
///
/// A verified request may still be a replay within the tolerance: keep the
/// ``WebhookNotification/messageID``s of the last minutes and drop repeats (the service
/// sends a message again, with the same id, when it did not get a 2xx answer).
public struct WebhookReceiver: Sendable {
    let secret: WebhookSecretKey
    /// The application the webhook belongs to.
    public let app: String
    /// How far `webhook-timestamp` may be from now, either way. Default: 5 minutes (Standard
    /// Webhooks' recommendation).
    public let tolerance: Duration
    /// The largest body read. Default: 2 MiB (the service's webhook bodies are at most its
    /// `1MiB` event limit plus the envelope).
    public let maxBodyBytes: Int

    /// A receiver for `app`'s webhook with `secret` (`whsec_…`, as in the service's
    /// configuration).
    public init(secret: String, app: String, tolerance: Duration = .seconds(300), maxBodyBytes: Int = 2 << 20) throws(NotificationError) {
        self.secret = try WebhookSecretKey(secret)
        self.app = app
        self.tolerance = tolerance
        self.maxBodyBytes = maxBodyBytes
    }

    /// Checks one request and reads its body.
    ///
    /// - Parameters:
    ///   - headers: the request's headers (names in any case).
    ///   - body: the request's body, as received (not parsed and written again).
    ///   - now: the current time.
    public func notification(headers: [String: String], body: [UInt8], now: Date = Date()) throws(NotificationError) -> WebhookNotification {
        guard body.count <= maxBodyBytes else {
            throw NotificationError(.tooLarge, "the body is \(body.count) bytes, more than \(maxBodyBytes)")
        }
        let id = try header("webhook-id", headers)
        let timestamp = try header("webhook-timestamp", headers)
        let signature = try header("webhook-signature", headers)
        guard id.utf8.count <= 256, !id.utf8.contains(where: { $0 < 0x21 || $0 > 0x7E }) else {
            throw .malformed("webhook-id is 1 to 256 printable ASCII characters")
        }
        let sent = try Self.seconds(timestamp)
        // Signature first: nothing of an unsigned request is believed, its time included.
        guard signature.utf8.count <= 4096, secret.verifies(header: signature, id: id, timestamp: timestamp, body: body) else {
            throw NotificationError(.badWebhookSignature, "webhook-signature does not verify with the webhook's secret")
        }
        let skew = abs(now.timeIntervalSince1970 - Double(sent))
        guard skew.isFinite, skew <= RESTClient.seconds(tolerance) else {
            throw NotificationError(
                .staleWebhook, "webhook-timestamp is \(Int(min(skew, 1e12))) s away from now; at most \(Int(RESTClient.seconds(tolerance))) s are accepted")
        }
        return try WebhookBody.read(body, id: id, sentAt: sent, app: app)
    }

    /// The one header named `name` (in any case); two spellings of it are refused.
    func header(_ name: String, _ headers: [String: String]) throws(NotificationError) -> String {
        var found: String?
        for (key, value) in headers where key.lowercased() == name {
            if found != nil { throw .malformed("the request has \(name) twice") }
            found = value
        }
        guard let found, !found.isEmpty else { throw .malformed("the request has no \(name) header; it is not a signed webhook request") }
        return found
    }

    /// Unix seconds of a `webhook-timestamp`: decimal digits only.
    static func seconds(_ text: String) throws(NotificationError) -> Int64 {
        guard (1...12).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let seconds = Int64(text) else {
            throw .malformed("webhook-timestamp is Unix seconds in decimal digits, got \(Bounded.quoted(text))")
        }
        return seconds
    }
}
