import PushCore

/// Who a notification is delivered through: what the per-provider limits are kept by, and the
/// `provider` label of the metrics (SPEC §11.13).
public enum Provider: String, Sendable, CaseIterable, CustomStringConvertible {
    case fcm
    case hms
    case harmonyos
    case apns
    case webpush
    case webhook

    /// The provider of a subscription kind's notifications.
    public init(_ kind: SubscriptionKind) {
        switch kind {
        case .fcm: self = .fcm
        case .hms: self = .hms
        case .harmonyos: self = .harmonyos
        case .apns: self = .apns
        case .webpush: self = .webpush
        case .webhook: self = .webhook
        }
    }

    /// The metric label.
    public var label: String { rawValue }
    public var description: String { rawValue }
}

extension Optional where Wrapped == Provider {
    /// The metric label: `none` for a notification no sender is configured for.
    public var label: String { self?.rawValue ?? "none" }
}
