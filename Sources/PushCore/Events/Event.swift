import PushJSON

/// How a subscription wants to hear about changes (SPEC §5).
public enum Mode: String, Sendable, CaseIterable {
    /// A wake-up only.
    case noData
    /// The new value at the subscription path.
    case value
    /// The children added, changed and removed.
    case childEvent
}

/// Why a subscription was revoked.
public enum RevokeReason: String, Sendable, CaseIterable {
    case permissionDenied = "permission_denied"
    case namespaceDoesNotExist = "namespace_does_not_exist"
    case disabled
    case expired
    case tooBig = "too_big"
    case deliveryRejected = "delivery_rejected"

    /// The reasons a `revoke` change record may carry (SPEC §4).
    public static let recordReasons: [RevokeReason] = [.permissionDenied, .namespaceDoesNotExist, .disabled]
}

/// Status of a data event after the size rule of SPEC §7.4.
public enum PayloadStatus: String, Sendable, CaseIterable {
    case ok = "OK"
    case onlyKeys = "OnlyKeys"
    case tooBig = "TooBig"
}

/// What one subscriber is told about one record: a data event or a revocation.
public struct Event: Sendable, Equatable {
    public enum Body: Sendable, Equatable {
        case noData
        /// The new value at the subscription path; `nil` when it was deleted.
        case value(JSON?)
        case childEvent(ChildDiff)
        case revoke(RevokeReason)
    }

    /// Application id.
    public let app: String
    /// The subscription path, canonical.
    public let path: String
    public let body: Body

    public init(app: String, path: String, body: Body) {
        self.app = app
        self.path = path
        self.body = body
    }

    /// The event a subscription of `mode` gets when the value at its path goes from `before`
    /// to `after`; `nil` when there is nothing to tell (unchanged, or no child differs).
    public static func data(app: String, path: String, mode: Mode, before: JSON?, after: JSON?) -> Event? {
        if before == after { return nil }
        return changed(app: app, path: path, mode: mode, before: before, after: after)
    }

    /// The event of a value known to differ from `before` to `after` (no comparison made):
    /// `nil` only for a childEvent whose children are the same.
    public static func changed(app: String, path: String, mode: Mode, before: JSON?, after: JSON?) -> Event? {
        switch mode {
        case .noData:
            return Event(app: app, path: path, body: .noData)
        case .value:
            return Event(app: app, path: path, body: .value(after))
        case .childEvent:
            let diff = ChildDiff(before: before, after: after)
            return diff.isEmpty ? nil : Event(app: app, path: path, body: .childEvent(diff))
        }
    }

    /// The mode of a data event; `nil` for a revocation.
    public var mode: Mode? {
        switch body {
        case .noData: return .noData
        case .value: return .value
        case .childEvent: return .childEvent
        case .revoke: return nil
        }
    }
}

/// The size rule of SPEC §7.4.
public enum PayloadLimit {
    /// A data payload of this many bytes or more is degraded (OnlyKeys / TooBig).
    public static let bytes = 4064

    /// The same rule for `webpush` subscriptions: the data map is the plaintext of one
    /// `aes128gcm` record, and a push service need accept no more than 4,096 bytes of body
    /// (RFC 8030 §7.2): 4,096 − 86 (header) − 1 (delimiter) − 16 (tag) = 3,993 bytes of
    /// plaintext, so a data map of 3,994 bytes or more is degraded.
    public static let webPushBytes = 3_994

    /// For `apns` subscriptions the §7.4 rule needs no other bound: the APNs body is the data
    /// map with `"aps":{"content-available":1},` put first, 30 bytes more, so a data map of at
    /// most 4,063 bytes makes a body of at most 4,093, within APNs's 4,096.
    public static let apnsOverhead = 30
}
