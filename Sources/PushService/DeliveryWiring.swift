import Foundation
import Logging
import PushCore
import PushDelivery
import PushJOSE
import PushStore

/// The senders of every configured application: FCM and HMS per application, one per webhook.
struct ConfiguredSenders: SenderDirectory {
    struct Application {
        var fcm: FCMSender?
        var hms: HMSSender?
        var webhooks: [String: WebhookSender]
    }

    let applications: [String: Application]

    init(_ configuration: ServiceConfiguration, context: SenderContext) throws {
        var applications: [String: Application] = [:]
        for (id, app) in configuration.apps {
            var prepared = Application(webhooks: [:])
            if let fcm = app.fcm {
                guard let data = FileManager.default.contents(atPath: fcm.serviceAccountFile) else {
                    throw ConfigurationError("apps.\(id).fcm.serviceAccountFile: cannot read \(fcm.serviceAccountFile)")
                }
                let key: ServiceAccountKey
                do {
                    key = try ServiceAccountKey(json: [UInt8](data))
                } catch {
                    throw ConfigurationError("apps.\(id).fcm.serviceAccountFile: \(error)")
                }
                prepared.fcm = FCMSender(key: key, endpoint: fcm.endpoint, context: context)
            }
            if let hms = app.hms {
                prepared.hms = HMSSender(
                    clientID: hms.clientID, clientSecret: hms.clientSecret.value, endpoint: hms.endpoint, tokenEndpoint: hms.tokenEndpoint,
                    context: context)
            }
            for (name, webhook) in app.webhooks {
                let secret: WebhookSecret
                do {
                    secret = try WebhookSecret(webhook.secret.value)
                } catch {
                    throw ConfigurationError("apps.\(id).webhooks.\(name).secret: \(error)")
                }
                prepared.webhooks[name] = WebhookSender(url: webhook.url, secret: secret, context: context)
            }
            applications[id] = prepared
        }
        self.applications = applications
    }

    func sender(for entry: OutboxEntry) -> (any NotificationSender)? {
        guard let app = applications[entry.app] else { return nil }
        switch entry.kind {
        case .mobile: return app.fcm
        case .huawei: return app.hms
        case .webhook: return entry.destination.flatMap { app.webhooks[$0] }
        }
    }
}

extension ServiceConfiguration.Delivery {
    var retryPolicy: RetryPolicy {
        RetryPolicy(
            initial: retry.initial.wholeMilliseconds, multiplier: retry.multiplier, jitter: retry.jitter, window: retry.window.wholeMilliseconds)
    }
}

/// Builds the `revoke` (reason `delivery_rejected`) of a subscription a provider refused, in
/// its format, while it still exists.
struct RejectionNotices: Sendable {
    let store: any SubscriptionStore
    let sealers: any SealerProvider
    let logger: Logger

    func notice(for entry: OutboxEntry) async -> OutboxEntry? {
        do {
            guard let subscription = try await store.subscriptions(handles: [entry.subscriptionHandle])[entry.subscriptionHandle] else {
                return nil
            }
            var builder = NotificationBuilder(sealers: sealers)
            let notice = Notice(
                subscription: subscription, event: Event(app: subscription.app, path: subscription.path.string, body: .revoke(.deliveryRejected)))
            return OutboxEntry(notice, payload: try builder.payload(notice).bytes, recordSeq: nil)
        } catch {
            logger.error(
                "the revoke of a refused subscription cannot be built; it is removed without one",
                metadata: ["subscription": "\(entry.subscriptionID)", "error": "\(error)"])
            return nil
        }
    }
}
