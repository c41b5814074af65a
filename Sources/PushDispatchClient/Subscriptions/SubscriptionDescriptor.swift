import Foundation
import PushCore

/// What a subscription asks for: the mode (what the device is told), the payload format, the
/// encryption of v2 payloads and how long it lasts.
///
/// ```swift
/// SubscriptionDescriptor(mode: .value, encryption: .endToEnd())
/// ```
public struct SubscriptionDescriptor: Sendable, Hashable {
    /// What the device is told of a change: a wake-up (`noData`, the default), the new
    /// `value`, or the children changed (`childEvent`).
    public var mode: Mode
    /// The payload format: `v2` (the default: signed, optionally encrypted) or the legacy `v1`
    /// (neither signed nor encrypted). Webhook subscriptions ignore it (SPEC §11.11).
    public var format: PayloadFormat
    /// How v2 payloads are encrypted; `nil` (the default): signed only. Webhook subscriptions
    /// ignore it.
    public var encryption: NotificationEncryption?
    /// When the subscription ends; `nil` (the default): the application's default lifetime.
    /// The service caps it to the application's maximum lifetime.
    public var expiration: Date?
    /// Whether subscribing again to the same node from the same device refreshes the existing
    /// subscription (with this descriptor's mode, format, encryption and expiration) rather
    /// than failing with ``PushClientError/Code/conflict``. Default: `true`.
    public var allowsUpdate: Bool

    /// A descriptor; every field has the default documented on it.
    public init(
        mode: Mode = .noData, format: PayloadFormat = .v2, encryption: NotificationEncryption? = nil, expiration: Date? = nil,
        allowsUpdate: Bool = true
    ) {
        self.mode = mode
        self.format = format
        self.encryption = encryption
        self.expiration = expiration
        self.allowsUpdate = allowsUpdate
    }

    /// `expirationTimestampSeconds` of ``expiration``: whole seconds, rounded up.
    func expirationSeconds() throws(PushClientError) -> Int64? {
        guard let expiration else { return nil }
        return try Self.seconds(expiration)
    }

    /// Unix seconds of a date in the future of the epoch (0 would mean "remove").
    static func seconds(_ date: Date) throws(PushClientError) -> Int64 {
        let seconds = date.timeIntervalSince1970.rounded(.up)
        guard seconds.isFinite, seconds >= 1, seconds < 1e15, let whole = Int64(exactly: seconds) else {
            throw .invalidArgument("an expiration is a date after 1970 and before the year 30000")
        }
        return whole
    }
}
