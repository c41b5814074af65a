import PushCore
import PushJSON

/// A subscription document as a client sends it (SPEC §5), checked for shape. What depends on
/// the application's configuration (webhook names, keys, lifetimes) is checked by
/// ``SubscriptionRules``.
public struct SubscriptionRequest: Sendable, Equatable {
    public var kind: SubscriptionKind
    public var mode: Mode
    public var path: Path
    public var context: String?
    public var destination: String?
    public var format: PayloadFormat
    public var encryption: EncryptionSpec?
    /// `expirationTimestampSeconds`: `nil` for the default lifetime, `0` to remove.
    public var expiration: Int64?

    /// Longest `context` accepted, in bytes (device tokens are a few hundred bytes).
    public static let maxContextBytes = 4096

    static let fields = [
        "kind", "mode", "path", "context", "destination", "format", "encryption", "expirationTimestampSeconds",
        // Read back from a document the service returned; must agree with the URL, else ignored.
        "id", "uid", "app", "createdAt",
    ]

    /// Reads a request body for the subscription of `uid` in `app`.
    public static func decode(_ json: JSON, app: String, uid: String) throws(RequestError) -> SubscriptionRequest {
        let reader = try FieldReader(json, name: "subscription", allowed: fields)
        if let bodyApp = try reader.optionalString("app"), !utf8Equal(bodyApp, app) {
            throw RequestError(.invalid, "app: \(quoted(bodyApp)) differs from the application in the URL, \(quoted(app))")
        }
        if let bodyUID = try reader.optionalString("uid"), !utf8Equal(bodyUID, uid) {
            throw RequestError(.invalid, "uid: \(quoted(bodyUID)) differs from the uid in the URL, \(quoted(uid))")
        }
        guard let kind = try reader.enumeration("kind", SubscriptionKind.self) else {
            throw RequestError(.missing, "kind: missing; expected one of \(SubscriptionKind.allCases.map { quoted($0.rawValue) }.joined(separator: ", "))")
        }
        let mode = try reader.enumeration("mode", Mode.self) ?? .noData
        let pathText = try reader.requiredString("path")
        let path: Path
        do {
            path = try Path(pathText)
        } catch {
            throw RequestError(.invalid, "path \(quoted(String(pathText.prefix(64)))): \(error)")
        }
        var context: String?
        if kind == .webpush {
            // The browser's PushSubscription, as an object or its JSON text: kept canonical.
            if let value = reader.value("context"), !value.isNull {
                context = try WebPushContext(value).canonicalText
            }
        } else {
            context = try reader.optionalString("context")
        }
        let destination = try reader.optionalString("destination")
        switch kind {
        case .fcm, .hms, .harmonyos, .apns, .webpush:
            guard let text = context, !text.isEmpty else {
                throw RequestError(.missing, "context: missing; a \(kind.rawValue) subscription carries \(kind.contextDescription)")
            }
            if kind == .apns { context = try APNsDeviceToken.canonical(text) }
            if destination != nil {
                throw RequestError(.invalid, "destination: only webhook subscriptions have a destination")
            }
        case .webhook:
            guard let destination, !destination.isEmpty else {
                throw RequestError(.missing, "destination: missing; name one of the application's webhooks")
            }
        }
        if let context, context.utf8.count > maxContextBytes {
            throw RequestError(.tooLarge, "context: \(context.utf8.count) bytes; at most \(maxContextBytes)")
        }
        // No device token or webhook context holds it, and PostgreSQL's text cannot (the same
        // answer on either store).
        if let context, context.utf8.contains(0) {
            throw RequestError(.invalid, "context: contains the character U+0000 (NUL), which no device token or webhook context holds")
        }
        let format = try reader.enumeration("format", PayloadFormat.self) ?? .v2
        var encryption: EncryptionSpec?
        if let value = reader.value("encryption"), !value.isNull {
            encryption = try EncryptionSpec.decode(value, field: "encryption")
        }
        var expiration: Int64?
        if let value = reader.value("expirationTimestampSeconds"), !value.isNull {
            guard case .int(let seconds) = value, seconds >= 0 else {
                throw RequestError(.invalid, "expirationTimestampSeconds: expected Unix seconds (a non-negative integer), or 0 to remove")
            }
            expiration = seconds
        }
        return SubscriptionRequest(
            kind: kind, mode: mode, path: path, context: context, destination: destination, format: format,
            encryption: encryption, expiration: expiration)
    }

    public func tuple(app: String, uid: String) -> SubscriptionTuple {
        SubscriptionTuple(app: app, uid: uid, kind: kind, destination: destination, path: path, context: context)
    }
}

/// Subscription lifetimes of an application (SPEC §5, §11.9).
public struct SubscriptionLifetimes: Sendable, Equatable {
    /// When a request names no expiration: now + this, in seconds.
    public var defaultLifetime: Int64
    /// An expiration beyond now + this is capped to it.
    public var maxLifetime: Int64

    public static let standard = SubscriptionLifetimes(defaultLifetime: 7 * 86_400, maxLifetime: 30 * 86_400)

    public init(defaultLifetime: Int64, maxLifetime: Int64) {
        self.defaultLifetime = defaultLifetime
        self.maxLifetime = maxLifetime
    }

    /// The expiration to store for a request made at `now` asking for `requested` (`nil`:
    /// the default). A time in the past is an error; one beyond the maximum is capped.
    public func expiration(requested: Int64?, now: Int64) throws(RequestError) -> Int64 {
        guard let requested else { return now.saturatingAdding(min(defaultLifetime, maxLifetime)) }
        if requested <= now {
            throw RequestError(.invalid, "expirationTimestampSeconds: \(requested) is not in the future (now is \(now)); use 0 to remove")
        }
        return min(requested, now.saturatingAdding(maxLifetime))
    }
}

/// What an application's configuration allows in a subscription.
public struct SubscriptionRules: Sendable {
    /// Names of the application's webhooks.
    public var webhooks: Set<String>
    public var lifetimes: SubscriptionLifetimes
    /// Subscriptions one user may have in the application (`subscriptions.maxPerUser`; `nil`:
    /// no limit).
    public var maxPerUser: Int? = 100
    /// Checks an `encryption` block against the application's keys (PushJOSE knows how).
    public var checkEncryption: @Sendable (EncryptionSpec) throws(RequestError) -> Void
    /// Checks a device `context` (canonical, its shape already checked) against what the
    /// application can reach: that it configures the provider, and for Web Push that the keys
    /// are usable and the endpoint is a push service it accepts (PushDelivery knows how).
    /// Default: every context accepted.
    public var checkContext: @Sendable (SubscriptionKind, String) throws(RequestError) -> Void = { _, _ in }

    public init(
        webhooks: Set<String>, lifetimes: SubscriptionLifetimes,
        checkEncryption: @escaping @Sendable (EncryptionSpec) throws(RequestError) -> Void
    ) {
        self.webhooks = webhooks
        self.lifetimes = lifetimes
        self.checkEncryption = checkEncryption
    }

    /// Checks what depends on the application: the webhook named, the encryption block.
    public func check(_ request: SubscriptionRequest) throws(RequestError) {
        if request.kind == .webhook, let destination = request.destination, !webhooks.contains(destination) {
            let known = webhooks.sorted().map(quoted).joined(separator: ", ")
            throw RequestError(.notConfigured, "destination: \(quoted(destination)) is not a webhook of this application (configured: \(known.isEmpty ? "none" : known))")
        }
        if let context = request.context, request.kind != .webhook {
            try checkContext(request.kind, context)
        }
        if let encryption = request.encryption {
            try checkEncryption(encryption)
        }
    }
}
