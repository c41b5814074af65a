/// What a notification tells its subscription.
public enum NotificationKind: String, Sendable, CaseIterable {
    case value, noData, childEvent, revoke

    /// A waiting notification of these kinds gives way to a newer one of its subscription, and
    /// to a revocation (SPEC §6, §11.6).
    public var coalesces: Bool { self == .value || self == .noData }

    public init(_ event: Event) {
        switch event.body {
        case .noData: self = .noData
        case .value: self = .value
        case .childEvent: self = .childEvent
        case .revoke: self = .revoke
        }
    }
}

/// A notification to deliver: everything a sender needs.
public struct OutboxEntry: Sendable, Equatable {
    public var app: String
    public var subscriptionHandle: Int64
    public var subscriptionID: String
    public var kind: SubscriptionKind
    /// The device token (`mobile`, `huawei`) or the webhook's context.
    public var target: String?
    /// The webhook's name (`webhook` only).
    public var destination: String?
    public var notification: NotificationKind
    /// The data payload (v1/v2) or the webhook body without its `id`.
    public var payload: [UInt8]
    /// The record that led to it (`nil` for expiry).
    public var recordSeq: Int64?

    public init(
        app: String, subscriptionHandle: Int64, subscriptionID: String, kind: SubscriptionKind, target: String?, destination: String?,
        notification: NotificationKind, payload: [UInt8], recordSeq: Int64?
    ) {
        self.app = app
        self.subscriptionHandle = subscriptionHandle
        self.subscriptionID = subscriptionID
        self.kind = kind
        self.target = target
        self.destination = destination
        self.notification = notification
        self.payload = payload
        self.recordSeq = recordSeq
    }

    /// The entry of a notice built into `payload`.
    public init(_ notice: Notice, payload: [UInt8], recordSeq: Int64?) {
        let subscription = notice.subscription
        self.init(
            app: subscription.app, subscriptionHandle: subscription.handle ?? 0, subscriptionID: subscription.id, kind: subscription.kind,
            target: subscription.tuple.context, destination: subscription.tuple.destination, notification: NotificationKind(notice.event),
            payload: payload, recordSeq: recordSeq)
    }
}
