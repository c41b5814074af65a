import Foundation
import PushContracts
import PushCore
import PushDelivery
import PushHTTP
import PushJOSE

/// The senders of every configured application (FCM and HMS per application, one per
/// webhook), over the HTTP transports that they own: ``shutdown()`` closes them. HTTPS goes
/// over the HTTP/2 transport (several connections per host, many streams each); `http://`
/// URLs and hosts that do not agree on HTTP/2 go over the one HTTP/1.1 transport of the
/// process (async-http-client), which both HTTP/2 transports share.
struct ConfiguredSenders {
    /// Where each notification goes (what the dispatcher is given).
    let table: SenderTable
    let transport: HTTP2Transport
    /// Web Push's own transport: its URLs come from subscribers, so it connects only to public
    /// addresses. `nil` when no application sends Web Push under that restriction.
    let publicTransport: HTTP2Transport?
    /// HTTP/1.1, behind both.
    let fallback: HTTP1Transport

    /// Reads the service-account files and checks the webhook secrets; throws
    /// ``ConfigurationError`` naming the key at fault.
    init(_ configuration: ServiceConfiguration, clock: any ServiceClock, counters: DeliveryCounters, metrics: any MetricsRecorder = NoMetrics()) async throws {
        let delivery = configuration.delivery
        let fallback = try HTTP1Transport(caFile: delivery.caFile, idleTimeout: delivery.idleTimeout)
        var transport: HTTP2Transport?
        var publicTransport: HTTP2Transport?
        do {
            let settings = HTTP2Transport.Configuration(
                connectionsPerOrigin: delivery.connectionsPerHost, caFile: delivery.caFile, idleTimeout: delivery.idleTimeout,
                maximumOrigins: delivery.maximumOrigins)
            let shared = try HTTP2Transport(configuration: settings, fallback: fallback, metrics: metrics)
            transport = shared
            if configuration.apps.values.contains(where: { $0.webpush.map { !$0.allowPrivateAddresses } ?? false }) {
                var publicSettings = settings
                publicSettings.publicAddressesOnly = true
                publicTransport = try HTTP2Transport(configuration: publicSettings, fallback: fallback, metrics: metrics)
            }
            let context = SenderContext(transport: shared, timeout: delivery.timeout, clock: clock, counters: counters)
            var publicContext = context
            if let publicTransport { publicContext.transport = publicTransport }
            table = SenderTable(try Self.applications(configuration, context: context, publicContext: publicContext))
            self.transport = shared
        } catch {
            try? await transport?.shutdown()
            try? await publicTransport?.shutdown()
            try? await fallback.shutdown()
            throw error
        }
        self.publicTransport = publicTransport
        self.fallback = fallback
    }

    /// - Parameter publicContext: for Web Push senders that must reach public addresses only.
    static func applications(_ configuration: ServiceConfiguration, context: SenderContext, publicContext: SenderContext) throws
        -> [String: ApplicationSenders]
    {
        var applications: [String: ApplicationSenders] = [:]
        let window = configuration.delivery.retry.window.components.seconds
        // One provider token per team and key, shared by the applications that use them: APNs
        // counts token renewals per team, so applications renewing their own would together
        // renew too often (429 TooManyProviderTokenUpdates).
        // (The configuration refuses one key id with two keys.)
        var tokens: [String: APNsProviderToken] = [:]
        for (id, app) in configuration.apps {
            var prepared = ApplicationSenders()
            if let apns = app.apns {
                let key = apns.teamID + "/" + apns.keyID
                let token: APNsProviderToken
                if let shared = tokens[key] {
                    token = shared
                } else {
                    do {
                        token = try APNsProviderToken(teamID: apns.teamID, keyID: apns.keyID, privateKeyPEM: apns.privateKey.value)
                    } catch {
                        throw ConfigurationError(nil, .invalid, "apps.\(id).\(error)")
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
                    throw ConfigurationError("apps.\(id).webpush.vapidPrivateKey", .invalid, "\(error)")
                }
                prepared.webpush = WebPushSender(
                    vapid: key, subject: webpush.subject, policy: webpush.policy, ttl: window,
                    context: webpush.allowPrivateAddresses ? context : publicContext)
            }
            if let fcm = app.fcm {
                guard let data = FileManager.default.contents(atPath: fcm.serviceAccountFile) else {
                    throw ConfigurationError("apps.\(id).fcm.serviceAccountFile", .unreadable, "cannot read \(fcm.serviceAccountFile)")
                }
                let key: ServiceAccountKey
                do {
                    key = try ServiceAccountKey(json: [UInt8](data))
                } catch {
                    throw ConfigurationError("apps.\(id).fcm.serviceAccountFile", .invalid, "\(error)")
                }
                prepared.fcm = FCMSender(key: key, endpoint: fcm.endpoint, context: context)
            }
            if let hms = app.hms {
                prepared.hms = HMSSender(
                    clientID: hms.clientID, clientSecret: hms.clientSecret.value, endpoint: hms.endpoint, tokenEndpoint: hms.tokenEndpoint,
                    context: context)
            }
            if let harmony = app.harmonyos {
                guard let data = FileManager.default.contents(atPath: harmony.serviceAccountFile) else {
                    throw ConfigurationError("apps.\(id).harmonyos.serviceAccountFile", .unreadable, "cannot read \(harmony.serviceAccountFile)")
                }
                let account: HarmonyServiceAccount
                do {
                    account = try HarmonyServiceAccount(json: [UInt8](data))
                } catch {
                    throw ConfigurationError("apps.\(id).harmonyos.serviceAccountFile", .invalid, "\(error)")
                }
                prepared.harmonyos = HarmonySender(account: account, endpoint: harmony.endpoint, context: context)
            }
            for (name, webhook) in app.webhooks {
                let secret: WebhookSecret
                do {
                    secret = try WebhookSecret(webhook.secret.value)
                } catch {
                    throw ConfigurationError("apps.\(id).webhooks.\(name).secret", .invalid, "\(error)")
                }
                prepared.webhooks[name] = WebhookSender(url: webhook.url, secret: secret, context: context)
            }
            applications[id] = prepared
        }
        return applications
    }

    /// Closes the transports (they must be, before the process ends); again: nothing.
    func shutdown() async throws {
        try? await publicTransport?.shutdown()
        try? await transport.shutdown()
        try await fallback.shutdown()
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
    func dispatcher(claimant: String, alone: Bool, keepsHistory: Bool = false, share: InstanceShare = InstanceShare(), apps: [String: AppConfiguration] = [:])
        -> Dispatcher.Configuration
    {
        var configuration = Dispatcher.Configuration(
            retry: retryPolicy, perProvider: perProvider, perApp: perApp, perDestination: perDestination, claimant: claimant, releaseAllAtStart: alone)
        configuration.keepsHistory = keepsHistory
        configuration.share = share
        configuration.machine.pacing = pacingTable(apps: apps)
        configuration.settleLinger = Self.settleLinger
        return configuration
    }

    /// How long a trickle's answers wait for the next record's claim, to be stored with it
    /// (milliseconds): records 20 ms apart or closer (50 a second and more) then cost two write
    /// transactions each, not three. Only the history and the operations API see an answer up
    /// to this much later; no send waits for it.
    static let settleLinger: Int64 = 20

    /// The budgets of `delivery.pacing`, each application's `pacing` and its webhooks'.
    func pacingTable(apps: [String: AppConfiguration]) -> PacingTable {
        var table = PacingTable(
            byKind: pacing.byKind.filter { $0.value > 0 }, retryAfterMinimum: pacing.retryAfterMinimum.wholeMilliseconds,
            retryAfterMaximum: pacing.retryAfterMaximum.wholeMilliseconds)
        for (name, app) in apps {
            // An application's `off` (0) overrides the default: not paced.
            if !app.pacing.isEmpty { table.byApp[name] = app.pacing }
            for (webhook, settings) in app.webhooks {
                if let rate = settings.pacing { table.byWebhook[name, default: [:]][webhook] = rate }
            }
        }
        return table
    }
}
