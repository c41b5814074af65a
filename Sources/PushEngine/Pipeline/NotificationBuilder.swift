import PushCore
import PushJSON
import PushMatching

/// Builds what a subscription receives for a notice (SPEC §7, §8):
///
/// - `mobile`, `huawei` and `apns`: the data payload, v1 or v2, with the size rule of §7.4;
/// - `webpush`: the same at the Web Push bound (``PayloadLimit/webPushBytes``), the payload
///   being the plaintext the sender encrypts;
/// - `webhook`: the body of §8 without its `id` (which the sender adds, stable across retries):
///   `{"app","uid","subscription","path","context","event"}`, the event plain (§11.11) and
///   degraded like §7.4 at the webhook limit, measured on the event.
public struct NotificationBuilder: Sendable {
    /// The webhook body limit of SPEC §7.4 (default 1 MiB), applied to the event.
    public let webhookLimit: Int
    let sealers: any SealerProvider
    private let v1 = V1PayloadBuilder()
    private var v2 = V2PayloadBuilder()
    private let v1WebPush = V1PayloadBuilder(limit: PayloadLimit.webPushBytes)
    private var v2WebPush = V2PayloadBuilder(limit: PayloadLimit.webPushBytes)

    public init(sealers: any SealerProvider, webhookLimit: Int = 1 << 20) {
        self.sealers = sealers
        self.webhookLimit = webhookLimit
    }

    /// Appends the payload of `notice` to `out`; returns the status of a value or childEvent
    /// event (`nil` for noData and revocations).
    @discardableResult
    public mutating func write(_ notice: Notice, into out: inout JSONWriter) throws -> PayloadStatus? {
        let subscription = notice.subscription
        switch subscription.kind {
        case .webhook:
            return writeWebhookBody(notice, into: &out)
        case .fcm, .hms, .apns:
            switch subscription.format {
            case .v1:
                return v1.build(notice.event, into: &out)
            case .v2:
                return try v2.build(notice.event, sealer: try sealers.sealer(for: subscription), into: &out)
            }
        case .webpush:
            switch subscription.format {
            case .v1:
                return v1WebPush.build(notice.event, into: &out)
            case .v2:
                return try v2WebPush.build(notice.event, sealer: try sealers.sealer(for: subscription), into: &out)
            }
        }
    }

    /// The payload of `notice` as bytes, and its status.
    public mutating func payload(_ notice: Notice) throws -> (bytes: [UInt8], status: PayloadStatus?) {
        var out = JSONWriter(capacity: 512)
        let status = try write(notice, into: &out)
        return (out.bytes, status)
    }

    private func writeWebhookBody(_ notice: Notice, into out: inout JSONWriter) -> PayloadStatus? {
        let subscription = notice.subscription
        out.raw("{\"app\":")
        out.writeString(subscription.app)
        out.raw(",\"uid\":")
        out.writeString(subscription.uid)
        out.raw(",\"subscription\":")
        out.writeString(subscription.id)
        out.raw(",\"path\":")
        out.writeString(subscription.path.string)
        out.raw(",\"context\":")
        if let context = subscription.tuple.context {
            out.writeString(context)
        } else {
            out.raw("null")
        }
        out.raw(",\"event\":")
        let start = out.count
        let statuses = EventWriter.statuses(for: notice.event)
        var chosen = statuses[0]
        for (index, status) in statuses.enumerated() {
            chosen = status
            EventWriter.write(notice.event, status: status, into: &out)
            if out.count - start < webhookLimit || index == statuses.count - 1 { break }
            out.truncate(to: start)
        }
        out.raw("}")
        return notice.event.mode == nil || notice.event.mode == .noData ? nil : chosen
    }
}
