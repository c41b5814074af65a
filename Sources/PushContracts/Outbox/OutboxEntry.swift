import PushCore
import PushJSON

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
    /// The fields, shared by copies (``SharedFields``): an entry is copied into the batch, the
    /// claim, the send and the settlement.
    struct Fields: Sendable, Equatable {
        var app: String
        var subscriptionHandle: Int64
        var subscriptionID: String
        var kind: SubscriptionKind
        var target: String?
        var destination: String?
        var notification: NotificationKind
        var payload: [UInt8]
        var recordSeq: Int64?
    }

    var shared: SharedFields<Fields>

    public var app: String {
        get { shared.fields.app }
        set { shared.fields.app = newValue }
    }
    public var subscriptionHandle: Int64 {
        get { shared.fields.subscriptionHandle }
        set { shared.fields.subscriptionHandle = newValue }
    }
    public var subscriptionID: String {
        get { shared.fields.subscriptionID }
        set { shared.fields.subscriptionID = newValue }
    }
    public var kind: SubscriptionKind {
        get { shared.fields.kind }
        set { shared.fields.kind = newValue }
    }
    /// The device token (`mobile`, `huawei`) or the webhook's context.
    public var target: String? {
        get { shared.fields.target }
        set { shared.fields.target = newValue }
    }
    /// The webhook's name (`webhook` only).
    public var destination: String? {
        get { shared.fields.destination }
        set { shared.fields.destination = newValue }
    }
    public var notification: NotificationKind {
        get { shared.fields.notification }
        set { shared.fields.notification = newValue }
    }
    /// The data payload (v1/v2) or the webhook body without its `id`.
    public var payload: [UInt8] {
        get { shared.fields.payload }
        set { shared.fields.payload = newValue }
    }
    /// The record that led to it (`nil` for expiry).
    public var recordSeq: Int64? {
        get { shared.fields.recordSeq }
        set { shared.fields.recordSeq = newValue }
    }

    public init(
        app: String, subscriptionHandle: Int64, subscriptionID: String, kind: SubscriptionKind, target: String?, destination: String?,
        notification: NotificationKind, payload: [UInt8], recordSeq: Int64?
    ) {
        shared = SharedFields(
            Fields(
                app: app, subscriptionHandle: subscriptionHandle, subscriptionID: subscriptionID, kind: kind, target: target,
                destination: destination, notification: notification, payload: payload, recordSeq: recordSeq))
    }
}
