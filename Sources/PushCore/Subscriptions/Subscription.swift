import PushJSON

/// Where a subscription's notifications go (SPEC §5).
public enum SubscriptionKind: String, Sendable, CaseIterable {
    /// Firebase Cloud Messaging; `context` is the device's FCM token.
    case fcm = "mobile"
    /// Huawei HMS Push Kit; `context` is the device's HMS token.
    case hms = "huawei"
    /// Huawei Push Kit v3 for HarmonyOS 5 and later; `context` is the device's push token
    /// (`pushService.getToken()`).
    case harmonyos
    /// A webhook of the application named by `destination`; `context` is passed to it.
    case webhook
    /// Apple Push Notification service, directly (no FCM relay); `context` is the device token
    /// in hexadecimal.
    case apns
    /// Web Push (RFC 8030/8291/8292); `context` is the browser's `PushSubscription` JSON
    /// (``WebPushContext``).
    case webpush

    /// What `context` holds, for messages.
    public var contextDescription: String {
        switch self {
        case .fcm: "the device's FCM registration token"
        case .hms: "the device's HMS push token"
        case .harmonyos: "the device's HarmonyOS push token"
        case .apns: "the device's APNs token in hexadecimal"
        case .webpush: "the browser's PushSubscription JSON (endpoint and keys)"
        case .webhook: "a value passed to the webhook"
        }
    }
}

/// What makes a subscription unique (SPEC §5): the 6-tuple. Its `id` is derived from it.
public struct SubscriptionTuple: Sendable, Hashable {
    public var app: String
    public var uid: String
    public var kind: SubscriptionKind
    /// The webhook's name (`webhook` only).
    public var destination: String?
    public var path: Path
    /// The device token (`mobile`, `huawei`) or the webhook's context value.
    public var context: String?

    public init(app: String, uid: String, kind: SubscriptionKind, destination: String?, path: Path, context: String?) {
        self.app = app
        self.uid = uid
        self.kind = kind
        self.destination = destination
        self.path = path
        self.context = context
    }

    /// The bytes the id is derived from: each field as a 4-byte big-endian byte length and its
    /// UTF-8 bytes, in the order app, uid, kind, destination, path (canonical), context; an
    /// absent destination or context counts as the empty string.
    public var canonicalBytes: [UInt8] {
        var bytes: [UInt8] = []
        for field in [app, uid, kind.rawValue, destination ?? "", path.string, context ?? ""] {
            let utf8 = Array(field.utf8)
            let n = UInt32(utf8.count)
            bytes += [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
            bytes += utf8
        }
        return bytes
    }
}

/// A stored subscription: the tuple, what it asks for, and its lifetime.
public struct Subscription: Sendable, Equatable {
    /// The fields, shared by copies (``SharedFields``): the record engine copies each notified
    /// subscription a few times per record.
    struct Fields: Sendable, Equatable {
        var id: String
        var tuple: SubscriptionTuple
        var mode: Mode
        var format: PayloadFormat
        var encryption: EncryptionSpec?
        var createdAt: Int64
        var expiresAt: Int64
        var handle: Int64?
        var auth: JSON?
    }

    var shared: SharedFields<Fields>

    /// Derived from the tuple (see `SubscriptionID` in PushJOSE): the same tuple gives the same id.
    public var id: String {
        get { shared.fields.id }
        set { shared.fields.id = newValue }
    }
    public var tuple: SubscriptionTuple {
        get { shared.fields.tuple }
        set { shared.fields.tuple = newValue }
    }
    public var mode: Mode {
        get { shared.fields.mode }
        set { shared.fields.mode = newValue }
    }
    public var format: PayloadFormat {
        get { shared.fields.format }
        set { shared.fields.format = newValue }
    }
    public var encryption: EncryptionSpec? {
        get { shared.fields.encryption }
        set { shared.fields.encryption = newValue }
    }
    /// Unix seconds.
    public var createdAt: Int64 {
        get { shared.fields.createdAt }
        set { shared.fields.createdAt = newValue }
    }
    /// Unix seconds: `expirationTimestampSeconds`.
    public var expiresAt: Int64 {
        get { shared.fields.expiresAt }
        set { shared.fields.expiresAt = newValue }
    }
    /// The store's row id, once stored (what the matching index holds).
    public var handle: Int64? {
        get { shared.fields.handle }
        set { shared.fields.handle = newValue }
    }
    /// The verified claims of the token it was created or last refreshed with (SPEC §12): the
    /// read rules are evaluated again with them. `nil` for subscriptions stored before rules
    /// existed: their `auth` is `{"uid": uid}` alone. Not part of the REST document.
    public var auth: JSON? {
        get { shared.fields.auth }
        set { shared.fields.auth = newValue }
    }

    /// Longest claims a subscription keeps, compact JSON bytes.
    public static let maxAuthBytes = 4_096

    /// Whether `claims` can be kept as ``auth``: an object of at most ``maxAuthBytes``.
    public static func claimsFit(_ claims: JSON) -> Bool {
        guard case .object = claims else { return false }
        return claims.description.utf8.count <= maxAuthBytes
    }

    public init(
        id: String, tuple: SubscriptionTuple, mode: Mode, format: PayloadFormat, encryption: EncryptionSpec?,
        createdAt: Int64, expiresAt: Int64, handle: Int64? = nil, auth: JSON? = nil
    ) {
        shared = SharedFields(
            Fields(
                id: id, tuple: tuple, mode: mode, format: format, encryption: encryption, createdAt: createdAt, expiresAt: expiresAt,
                handle: handle, auth: auth))
    }

    public var app: String { tuple.app }

    /// The compact JSON text of ``auth``, as stored.
    public var authText: String? { auth.map { $0.description } }
    public var uid: String { tuple.uid }
    public var kind: SubscriptionKind { tuple.kind }
    public var path: Path { tuple.path }

    /// The document the REST API returns (SPEC §5), keys in key order: `app`, `context`,
    /// `createdAt`, `destination`, `encryption`, `expirationTimestampSeconds`, `format`, `id`,
    /// `kind`, `mode`, `path`, `uid` (absent members left out).
    public var document: JSON {
        var members: [(Key, JSON)] = [
            ("app", .string(app)), ("createdAt", .int(createdAt)), ("expirationTimestampSeconds", .int(expiresAt)),
            ("format", .string(format.rawValue)), ("id", .string(id)), ("kind", .string(kind.rawValue)),
            ("mode", .string(mode.rawValue)), ("path", .string(path.string)), ("uid", .string(uid)),
        ]
        if let context = tuple.context { members.append(("context", .string(context))) }
        if let destination = tuple.destination { members.append(("destination", .string(destination))) }
        if let encryption { members.append(("encryption", encryption.json)) }
        return .object(JSONObject(members))
    }

    /// A subscription from its document (as `document` writes it).
    public init(document: JSON, handle: Int64? = nil) throws(RequestError) {
        let reader = try FieldReader(
            document, name: "subscription",
            allowed: ["app", "uid", "kind", "mode", "path", "context", "destination", "format", "encryption", "createdAt",
                      "expirationTimestampSeconds", "id"])
        guard let kind = try reader.enumeration("kind", SubscriptionKind.self) else { throw RequestError(.missing, "kind: missing") }
        let pathText = try reader.requiredString("path")
        let path: Path
        do { path = try Path(pathText) } catch { throw RequestError(.invalid, "path: \(error)") }
        var encryption: EncryptionSpec?
        if let value = reader.value("encryption"), !value.isNull {
            encryption = try EncryptionSpec.decode(value, field: "encryption")
        }
        guard let createdAt = reader.value("createdAt")?.integerValue,
            let expiresAt = reader.value("expirationTimestampSeconds")?.integerValue
        else {
            throw RequestError(.invalid, "subscription: createdAt and expirationTimestampSeconds must be integers")
        }
        self.init(
            id: try reader.requiredString("id"),
            tuple: SubscriptionTuple(
                app: try reader.requiredString("app"), uid: try reader.requiredString("uid"), kind: kind,
                destination: try reader.optionalString("destination"), path: path, context: try reader.optionalString("context")),
            mode: try reader.enumeration("mode", Mode.self) ?? .noData,
            format: try reader.enumeration("format", PayloadFormat.self) ?? .v2,
            encryption: encryption, createdAt: createdAt, expiresAt: expiresAt, handle: handle)
    }
}

extension EncryptionSpec {
    /// The `encryption` block as JSON: `{"alg","enc","jwk"?,"kid"?}`.
    public var json: JSON {
        var members: [(Key, JSON)] = [("alg", .string(alg)), ("enc", .string(enc))]
        if let kid { members.append(("kid", .string(kid))) }
        if let jwk { members.append(("jwk", jwk)) }
        return .object(JSONObject(members))
    }
}
