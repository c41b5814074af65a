import PushCore
import PushJSON
import PushMatching

/// Builds what a subscription receives for a notice (SPEC §7, §8):
///
/// - `mobile`, `huawei`, `harmonyos` and `apns`: the data payload, v1 or v2, with the size rule of §7.4;
/// - `webpush`: the same at the Web Push bound (``PayloadLimit/webPushBytes``), the payload
///   being the plaintext the sender encrypts; with the application's notification template, a
///   Declarative Web Push message around it (``WebPushNotification``);
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
    /// The applications' Web Push notification templates (`apps.<id>.webpush.notification`).
    let webPushNotifications: [String: WebPushNotification]

    public init(sealers: any SealerProvider, webhookLimit: Int = 1 << 20, webPushNotifications: [String: WebPushNotification] = [:]) {
        self.sealers = sealers
        self.webhookLimit = webhookLimit
        self.webPushNotifications = webPushNotifications
    }

    /// Appends the payload of `notice` to `out`; returns the status of a value or childEvent
    /// event (`nil` for noData and revocations).
    @discardableResult
    public mutating func write(_ notice: Notice, into out: inout JSONWriter) throws -> PayloadStatus? {
        let subscription = notice.subscription
        switch subscription.kind {
        case .webhook:
            return writeWebhookBody(notice, into: &out)
        case .fcm, .hms, .harmonyos, .apns:
            switch subscription.format {
            case .v1:
                return v1.build(notice.event, into: &out)
            case .v2:
                return try v2.build(notice.event, sealer: try sealers.sealer(for: subscription), into: &out)
            }
        case .webpush:
            if let template = webPushNotifications[subscription.app], notice.event.mode != nil {
                return try writeDeclarative(notice, template: template, into: &out)
            }
            switch subscription.format {
            case .v1:
                return v1WebPush.build(notice.event, into: &out)
            case .v2:
                return try v2WebPush.build(notice.event, sealer: try sealers.sealer(for: subscription), into: &out)
            }
        }
    }

    /// A Web Push payload with the application's notification: the declarative opening, then
    /// the data map's members, the whole bound like the data map alone (SPEC §7.4 at the Web
    /// Push bound): the data map degrades within what the notification leaves. Revocations go
    /// without one (nothing for the user to see).
    private mutating func writeDeclarative(_ notice: Notice, template: WebPushNotification, into out: inout JSONWriter) throws -> PayloadStatus? {
        let start = out.count
        template.writeOpening(for: notice.event, into: &out)
        let limit = PayloadLimit.webPushBytes - (out.count - start) + 1
        var data = JSONWriter(capacity: 1_024)
        let status: PayloadStatus?
        switch notice.subscription.format {
        case .v1:
            status = v1WebPush.build(notice.event, into: &data, limit: limit)
        case .v2:
            status = try v2WebPush.build(notice.event, sealer: try sealers.sealer(for: notice.subscription), into: &data, limit: limit)
        }
        // The data map's members after the opening's: its `{` left out.
        data.withUnsafeBytes { bytes in out.raw(UnsafeBufferPointer(rebasing: bytes.dropFirst())) }
        return status
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
