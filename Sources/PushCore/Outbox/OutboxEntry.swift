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
    /// The fields, held once and shared by copies: a copy of an entry is one retain (an entry
    /// is copied into the batch, the claim, the send and the settlement); a change makes a new
    /// box.
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

    final class Box: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    var box: Box

    mutating func update(_ change: (inout Fields) -> Void) {
        var fields = box.fields
        change(&fields)
        box = Box(fields)
    }

    public static func == (lhs: OutboxEntry, rhs: OutboxEntry) -> Bool {
        lhs.box === rhs.box || lhs.box.fields == rhs.box.fields
    }

    public var app: String {
        get { box.fields.app }
        set { update { $0.app = newValue } }
    }
    public var subscriptionHandle: Int64 {
        get { box.fields.subscriptionHandle }
        set { update { $0.subscriptionHandle = newValue } }
    }
    public var subscriptionID: String {
        get { box.fields.subscriptionID }
        set { update { $0.subscriptionID = newValue } }
    }
    public var kind: SubscriptionKind {
        get { box.fields.kind }
        set { update { $0.kind = newValue } }
    }
    /// The device token (`mobile`, `huawei`) or the webhook's context.
    public var target: String? {
        get { box.fields.target }
        set { update { $0.target = newValue } }
    }
    /// The webhook's name (`webhook` only).
    public var destination: String? {
        get { box.fields.destination }
        set { update { $0.destination = newValue } }
    }
    public var notification: NotificationKind {
        get { box.fields.notification }
        set { update { $0.notification = newValue } }
    }
    /// The data payload (v1/v2) or the webhook body without its `id`.
    public var payload: [UInt8] {
        get { box.fields.payload }
        set { update { $0.payload = newValue } }
    }
    /// The record that led to it (`nil` for expiry).
    public var recordSeq: Int64? {
        get { box.fields.recordSeq }
        set { update { $0.recordSeq = newValue } }
    }

    public init(
        app: String, subscriptionHandle: Int64, subscriptionID: String, kind: SubscriptionKind, target: String?, destination: String?,
        notification: NotificationKind, payload: [UInt8], recordSeq: Int64?
    ) {
        box = Box(
            Fields(
                app: app, subscriptionHandle: subscriptionHandle, subscriptionID: subscriptionID, kind: kind, target: target,
                destination: destination, notification: notification, payload: payload, recordSeq: recordSeq))
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
