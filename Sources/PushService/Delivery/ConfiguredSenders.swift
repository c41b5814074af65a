import Foundation
import PushCore
import PushDelivery
import PushJOSE

/// The senders of every configured application (FCM and HMS per application, one per
/// webhook), over one shared HTTP transport that they own: ``shutdown()`` closes it. HTTPS
/// goes over the HTTP/2 transport (several connections per host, many streams each); `http://`
/// URLs and hosts that do not agree on HTTP/2 go over async-http-client (HTTP/1.1).
struct ConfiguredSenders: SenderDirectory {
    struct Application {
        var fcm: FCMSender?
        var hms: HMSSender?
        var apns: APNsSender?
        var webpush: WebPushSender?
        var webhooks: [String: WebhookSender]
    }

    let applications: [String: Application]
    let transport: any HTTPTransport
    /// Web Push's own transport: its URLs come from subscribers, so it connects only to public
    /// addresses. `nil` when no application sends Web Push under that restriction.
    let publicTransport: (any HTTPTransport)?

    /// Reads the service-account files and checks the webhook secrets; throws
    /// ``ConfigurationError`` naming the key at fault.
    init(_ configuration: ServiceConfiguration, clock: any ServiceClock, counters: DeliveryCounters) async throws {
        let fallback = try AsyncHTTPTransport(clients: 2, caFile: configuration.delivery.caFile)
        let transport: HTTP2Transport
        do {
            transport = try HTTP2Transport(
                configuration: .init(connectionsPerOrigin: configuration.delivery.connectionsPerHost, caFile: configuration.delivery.caFile),
                fallback: fallback)
        } catch {
            try? await fallback.shutdown()
            throw error
        }
        var publicTransport: HTTP2Transport?
        do {
            if configuration.apps.values.contains(where: { $0.webpush.map { !$0.allowPrivateAddresses } ?? false }) {
                publicTransport = try HTTP2Transport(
                    configuration: .init(
                        connectionsPerOrigin: configuration.delivery.connectionsPerHost, caFile: configuration.delivery.caFile, publicAddressesOnly: true),
                    fallback: try AsyncHTTPTransport(clients: 1, caFile: configuration.delivery.caFile))
            }
            let context = SenderContext(transport: transport, timeout: configuration.delivery.timeout, clock: clock, counters: counters)
            var publicContext = context
            if let publicTransport { publicContext.transport = publicTransport }
            applications = try Self.applications(configuration, context: context, publicContext: publicContext)
        } catch {
            try? await transport.shutdown()
            try? await publicTransport?.shutdown()
            throw error
        }
        self.transport = transport
        self.publicTransport = publicTransport
    }

    /// - Parameter publicContext: for Web Push senders that must reach public addresses only.
    static func applications(_ configuration: ServiceConfiguration, context: SenderContext, publicContext: SenderContext) throws
        -> [String: Application]
    {
        var applications: [String: Application] = [:]
        let window = configuration.delivery.retry.window.components.seconds
        // One provider token per team and key, shared by the applications that use them: APNs
        // counts token renewals per team, so applications renewing their own would together
        // renew too often (429 TooManyProviderTokenUpdates).
        // (The configuration refuses one key id with two keys.)
        var tokens: [String: APNsProviderToken] = [:]
        for (id, app) in configuration.apps {
            var prepared = Application(webhooks: [:])
            if let apns = app.apns {
                let key = apns.teamID + "/" + apns.keyID
                let token: APNsProviderToken
                if let shared = tokens[key] {
                    token = shared
                } else {
                    do {
                        token = try APNsProviderToken(teamID: apns.teamID, keyID: apns.keyID, privateKeyPEM: apns.privateKey.value)
                    } catch {
                        throw ConfigurationError("apps.\(id).\(error)")
                    }
                    tokens[key] = token
                }
                prepared.apns = APNsSender(endpoint: apns.endpoint, topic: apns.topic, token: token, storage: window, context: context)
            }
            if let webpush = app.webpush {
                let key: VAPIDKey
                do {
                    key = try VAPIDKey(text: webpush.vapidPrivateKey.value)
                } catch {
                    throw ConfigurationError("apps.\(id).webpush.vapidPrivateKey: \(error)")
                }
                prepared.webpush = WebPushSender(
                    vapid: key, subject: webpush.subject, policy: webpush.policy, ttl: window,
                    context: webpush.allowPrivateAddresses ? context : publicContext)
            }
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
        return applications
    }

    func sender(for entry: OutboxEntry) -> (any NotificationSender)? {
        guard let app = applications[entry.app] else { return nil }
        switch entry.kind {
        case .mobile: return app.fcm
        case .huawei: return app.hms
        case .apns: return app.apns
        case .webpush: return app.webpush
        case .webhook: return entry.destination.flatMap { app.webhooks[$0] }
        }
    }

    /// Closes the transports (they must be, before the process ends).
    func shutdown() async throws {
        try? await publicTransport?.shutdown()
        try await transport.shutdown()
    }
}

extension AppConfiguration.WebPush {
    /// The endpoints its subscriptions may name.
    var policy: WebPushEndpointPolicy {
        WebPushEndpointPolicy(allowedHosts: allowedHosts, allowPrivateAddresses: allowPrivateAddresses)
    }
}

extension ServiceConfiguration.Delivery {
    var retryPolicy: RetryPolicy {
        RetryPolicy(
            initial: retry.initial.wholeMilliseconds, multiplier: retry.multiplier, jitter: retry.jitter, window: retry.window.wholeMilliseconds)
    }

    /// The delivery worker's configuration: claims filed under `claimant`; `alone`: it is the
    /// only worker on its store, so every claim is released at start (a crash's).
    func dispatcher(claimant: String, alone: Bool) -> Dispatcher.Configuration {
        Dispatcher.Configuration(retry: retryPolicy, perProvider: perProvider, perApp: perApp, claimant: claimant, releaseAllAtStart: alone)
    }
}
