import Crypto
import PushCore
import PushContracts
import PushHTTP
import PushJOSE
import Synchronization

/// Web Push for one application (RFC 8030, 8291, 8292): the data map, encrypted to the
/// browser's keys, posted to the push resource its subscription names.
///
/// Each send reads the subscription's context (``WebPushContext``), checks its endpoint again
/// against the application's policy (the configuration may have changed since it was made),
/// encrypts the payload (`aes128gcm`, one record) and posts it with a VAPID `Authorization`
/// for the endpoint's origin (cached, renewed well before its `exp`), `TTL` (the retry window:
/// the push service may keep the message as long as the service itself would try),
/// `Urgency: high`, and, for `value` and `noData` notifications, a `Topic` derived from the
/// subscription id, so that the push service too keeps only the newest of them (SPEC §6).
public struct WebPushSender: NotificationSender {
    public let provider = Provider.webpush
    let vapid: VAPIDKey
    let subject: String
    let policy: WebPushEndpointPolicy
    let ttl: Int64
    let context: SenderContext
    let headers: VAPIDHeaders

    /// - Parameters:
    ///   - subject: `webpush.subject` (`mailto:` or `https:`).
    ///   - ttl: seconds the push service may keep a message for an offline browser.
    ///   - context: its transport must connect only to public addresses unless `policy`
    ///     allows private ones.
    public init(vapid: VAPIDKey, subject: String, policy: WebPushEndpointPolicy, ttl: Int64, context: SenderContext) {
        self.vapid = vapid
        self.subject = subject
        self.policy = policy
        self.ttl = ttl
        self.context = context
        headers = VAPIDHeaders(key: vapid, subject: subject)
    }

    public func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome {
        let target: RequestTarget
        let keys: WebPushSubscriberKeys
        let endpoint: String
        do {
            let subscription = try WebPushContext(context: notification.entry.target ?? "")
            target = try policy.check(subscription.endpoint)
            keys = try WebPushSubscriberKeys(p256dh: subscription.p256dh, auth: subscription.auth)
            endpoint = subscription.endpoint
        } catch {
            // Checked when the subscription was made: the policy changed since (or a store
            // filled otherwise). Nothing can reach it: no revoke notice either.
            return .revokeDeadToken(reason: "the browser subscription can no longer be used: \(error)")
        }
        let body: [UInt8]
        do {
            body = try WebPushEncryption.encrypt(notification.entry.payload, for: keys)
        } catch {
            return .failed(reason: "the payload cannot be encrypted for Web Push: \(error)")
        }
        let authorization: String
        do {
            authorization = try headers.value(origin: WebPushEndpointPolicy.origin(of: target), now: now / 1_000)
        } catch {
            return .pause(reason: "the VAPID key cannot sign: \(error)")
        }
        var fields: [(String, String)] = [
            ("authorization", authorization), ("ttl", String(ttl)), ("urgency", "high"), ("content-encoding", "aes128gcm"),
            ("content-type", "application/octet-stream"),
        ]
        if notification.entry.notification.coalesces { fields.append(("topic", Self.topic(notification.entry.subscriptionID))) }
        do {
            let answer = try await context.send(OutgoingRequest(url: endpoint, headers: fields, body: body), provider: provider)
            return AnswerClassifier.webPush(answer, now: context.clock.now)
        } catch {
            return .unanswered(error)
        }
    }

    /// A subscription's `Topic`: 32 base64url characters (RFC 8030 §5.4's limit) of a hash of
    /// its id, so that the push service learns nothing of the id from it.
    static func topic(_ subscriptionID: String) -> String {
        let digest = SHA256.hash(data: Array("pushdispatch topic \(subscriptionID)".utf8))
        return Base64URL.encodeToString(Array(digest).prefix(24))
    }
}

/// The `Authorization` header of each push-service origin, signed once and reused until an
/// hour before its `exp` (12 hours after signing; RFC 8292 allows 24).
final class VAPIDHeaders: Sendable {
    static let lifetime: Int64 = 12 * 3_600
    static let margin: Int64 = 3_600
    static let maximumOrigins = 1_024

    let key: VAPIDKey
    let subject: String
    let cache = Mutex<[String: (value: String, expiresAt: Int64)]>([:])

    init(key: VAPIDKey, subject: String) {
        self.key = key
        self.subject = subject
    }

    /// How many origins hold a signed header, and the soonest of their expiries (seconds).
    var signed: (origins: Int, soonest: Int64?) {
        cache.withLock { cache in (cache.count, cache.values.map(\.expiresAt).min()) }
    }

    /// The header for `origin` at `now` (seconds).
    func value(origin: String, now: Int64) throws -> String {
        if let cached = cache.withLock({ $0[origin] }), now < cached.expiresAt - Self.margin, now >= cached.expiresAt - Self.lifetime {
            return cached.value
        }
        let expiresAt = now.saturatingAdding(Self.lifetime)
        let value = try key.authorization(audience: origin, expiresAt: expiresAt, subject: subject)
        cache.withLock { cache in
            if cache.count >= Self.maximumOrigins { cache.removeAll(keepingCapacity: true) }
            cache[origin] = (value, expiresAt)
        }
        return value
    }
}
