import PushCore
import PushContracts

/// The senders of one application: one per provider configured, one per webhook name.
public struct ApplicationSenders: Sendable {
    public var fcm: FCMSender?
    public var hms: HMSSender?
    public var harmonyos: HarmonySender?
    public var apns: APNsSender?
    public var webpush: WebPushSender?
    public var webhooks: [String: WebhookSender]

    public init(
        fcm: FCMSender? = nil, hms: HMSSender? = nil, harmonyos: HarmonySender? = nil, apns: APNsSender? = nil, webpush: WebPushSender? = nil,
        webhooks: [String: WebhookSender] = [:]
    ) {
        self.fcm = fcm
        self.hms = hms
        self.harmonyos = harmonyos
        self.apns = apns
        self.webpush = webpush
        self.webhooks = webhooks
    }
}

/// Where each notification goes, by application: the sender of its kind (and webhook name).
/// Built once by the service from its configuration; the dispatcher asks it once per
/// notification claimed.
public struct SenderTable: SenderDirectory {
    public let applications: [String: ApplicationSenders]

    public init(_ applications: [String: ApplicationSenders]) {
        self.applications = applications
    }

    public func sender(for entry: OutboxEntry) -> (any NotificationSender)? {
        guard let app = applications[entry.app] else { return nil }
        switch entry.kind {
        case .fcm: return app.fcm
        case .hms: return app.hms
        case .harmonyos: return app.harmonyos
        case .apns: return app.apns
        case .webpush: return app.webpush
        case .webhook: return entry.destination.flatMap { app.webhooks[$0] }
        }
    }
}
