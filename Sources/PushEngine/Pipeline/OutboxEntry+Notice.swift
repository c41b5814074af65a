import PushContracts
import PushCore

extension OutboxEntry {
    /// The entry of a notice built into `payload`.
    public init(_ notice: Notice, payload: [UInt8], recordSeq: Int64?) {
        let subscription = notice.subscription
        self.init(
            app: subscription.app, subscriptionHandle: subscription.handle ?? 0, subscriptionID: subscription.id, kind: subscription.kind,
            target: subscription.tuple.context, destination: subscription.tuple.destination, notification: NotificationKind(notice.event),
            payload: payload, recordSeq: recordSeq)
    }
}
