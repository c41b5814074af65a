import Foundation
import PushContracts
import PushCore
import PushJSON
import PushDelivery
import PushIngest
import PushJOSE
import PushMatching

/// Turns the configuration JSON into a ``ServiceConfiguration``, checking every key. A problem
/// names the key (and the variable that set it, if one did), says what is wrong and what was
/// expected; decoding goes on after a problem, so that every problem is reported at once.
struct ConfigurationDecoder {
    let baseDirectory: String
    let environment: [String: String]
    /// Key path (`http.port`) → the `PUSHDISPATCH_*` variable that set it.
    let overrides: [String: String]

    init(baseDirectory: String, environment: [String: String], overrides: [String: String] = [:]) {
        self.baseDirectory = baseDirectory
        self.environment = environment
        self.overrides = overrides
    }

    func decode(_ json: JSON) throws -> ServiceConfiguration {
        let report = ProblemReport()
        let configuration = decode(json, report: report)
        if !report.problems.isEmpty {
            throw ConfigurationError(problems: report.problems)
        }
        return configuration
    }

    /// `ingest.socket*`: who may connect, and how much one client may take.
    static func socketLimits(_ section: Section) -> SocketLimits {
        let defaults = SocketLimits()
        return SocketLimits(
            mode: section.fileMode("socketMode") ?? defaults.mode,
            maxConnections: Int(section.integer("socketMaxConnections", range: 1...65_536, expected: "1 to 65536") ?? Int64(defaults.maxConnections)),
            idleTimeout: section.duration("socketIdleTimeout", range: .seconds(1) ... .seconds(7 * 86_400)) ?? defaults.idleTimeout,
            maxBufferedBytes: Int(section.size("socketMaxBuffered", range: 4096...(1 << 32)) ?? Int64(defaults.maxBufferedBytes)),
            shutdownGrace: section.duration("socketShutdownGrace", range: .zero ... .seconds(3600)) ?? defaults.shutdownGrace)
    }

    func decode(_ json: JSON, report: ProblemReport) -> ServiceConfiguration {
        let context = Section.Context(report: report, overrides: overrides, baseDirectory: baseDirectory, environment: environment)
        let root = Section(json, path: "", schema: .root, context: context)

        let storeSection = root.section("store")
        let sqlite = storeSection.path("sqlite", parentMustExist: true)
        let postgres = storeSection.postgresURL("postgres")
        let store: ServiceConfiguration.Store
        switch (sqlite, postgres) {
        case (.some, .some):
            report.add("store", .conflict, "give either sqlite or postgres, not both")
            store = .sqlite(path: sqlite!)
        case (_, .some(let url)):
            store = .postgres(url: url)
        case (let path, nil):
            store = .sqlite(path: path ?? storeSection.resolve("./pushdispatch.db"))
        }

        let ingestSection = root.section("ingest")
        let socket = ingestSection.path("socket", parentMustExist: true)
        if let socket, socket.utf8.count > 107 {
            report.add(
                ingestSection.label("socket"), .invalid, "the socket path is \(socket.utf8.count) bytes; a Unix socket path is at most 107 (move it to a shorter folder)")
        }
        let ingest = ServiceConfiguration.Ingest(
            queueFile: ingestSection.path("queueFile", parentMustExist: true), socket: socket,
            deadLetter: ingestSection.path("deadLetter", parentMustExist: true) ?? ingestSection.resolve("./dead-letter.ndjson"),
            deadLetterMaxSize: Int(ingestSection.size("deadLetterMaxSize", range: (64 << 10)...(1 << 40)) ?? Int64(DeadLetterFile.defaultMaxSize)),
            maxRecordBytes: Int(ingestSection.size("maxRecordBytes", range: (64 << 10)...(1 << 30)) ?? 16 << 20),
            snapshotAfter: Int(ingestSection.size("snapshotAfter", range: 1...(1 << 40)) ?? 64 << 20),
            socketLimits: Self.socketLimits(ingestSection))

        let httpSection = root.section("http")
        var operationsToken = httpSection.secret("operationsToken")
        if let token = operationsToken, token.value.utf8.count < 16 || token.value.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            report.add(
                httpSection.label("operationsToken"), .invalid, "\(token.value.utf8.count) bytes; expected at least 16 printable ASCII characters without spaces (a bearer token)")
            operationsToken = nil
        }
        let http = ServiceConfiguration.HTTP(
            host: httpSection.host("host") ?? "127.0.0.1",
            port: Int(httpSection.integer("port", range: 0...65535, expected: "a port: 0 to 65535 (0 picks a free one)") ?? 8080),
            operationsToken: operationsToken,
            maxConnections: Int(httpSection.integer("maxConnections", range: 1...1_000_000, expected: "1 to 1000000") ?? 512))
        if !httpSection.has("operationsToken") && !http.isLoopback {
            report.warn(
                "http.operationsToken: not set, and http.host \(http.host) is not a loopback address: /metrics and /status answer 403 "
                    + "until it is set (16 or more printable characters; or PUSHDISPATCH_HTTP_OPERATIONSTOKEN)")
        }

        let deliverySection = root.section("delivery")
        let retrySection = deliverySection.section("retry")
        let concurrency = deliverySection.section("concurrency")
        var retry = ServiceConfiguration.Delivery.Retry(
            initial: retrySection.duration("initial", range: .milliseconds(10) ... .seconds(3600)) ?? .seconds(1),
            multiplier: retrySection.number("multiplier", range: 1...100) ?? 2,
            jitter: retrySection.number("jitter", range: 0...1) ?? 0.2,
            window: retrySection.duration("window", range: .seconds(1) ... .seconds(7 * 86_400)) ?? .seconds(7200))
        if retry.initial > retry.window {
            report.add(retrySection.label("initial"), .conflict, "longer than \(retrySection.label("window")); the first retry must fall within the window")
            retry.initial = retry.window
        }
        let perApp = Int(concurrency.integer("perApp", range: 1...65_536, expected: "1 to 65536") ?? 512)
        var perDestination = concurrency.integer("perDestination", range: 1...65_536, expected: "1 to 65536").map { Int($0) }
        if let bound = perDestination, bound > DispatchStateMachine.Configuration.destinations(perApp: perApp) {
            report.add(
                concurrency.label("perDestination"), .conflict,
                "\(bound) is more than three quarters of \(concurrency.label("perApp")) (\(DispatchStateMachine.Configuration.destinations(perApp: perApp))): all destinations together hold at most that many, the rest is kept for FCM, HMS and APNs")
            perDestination = nil
        }
        var delivery = ServiceConfiguration.Delivery(
            enabled: deliverySection.boolean("enabled") ?? true,
            retry: retry,
            timeout: deliverySection.duration("timeout", range: .milliseconds(100) ... .seconds(600)) ?? .seconds(10),
            perProvider: Int(concurrency.integer("perProvider", range: 1...65_536, expected: "1 to 65536") ?? 1_024),
            perApp: perApp,
            perDestination: perDestination,
            caFile: deliverySection.certificateFile("caFile"),
            connectionsPerHost: Int(deliverySection.integer("connectionsPerHost", range: 1...64, expected: "1 to 64") ?? 6),
            idleTimeout: deliverySection.duration("idleTimeout", range: .seconds(1) ... .seconds(3600)) ?? .seconds(60),
            maximumOrigins: Int(deliverySection.integer("maximumOrigins", range: 1...65_536, expected: "1 to 65536") ?? 1_024))
        let pacingSection = deliverySection.section("pacing")
        delivery.pacing.byKind.merge(Self.rates(pacingSection)) { $1 }
        delivery.pacing.retryAfterMinimum = pacingSection.duration("retryAfterMinimum", range: .zero ... .seconds(3600)) ?? .seconds(1)
        delivery.pacing.retryAfterMaximum = pacingSection.duration("retryAfterMaximum", range: .seconds(1) ... .seconds(86_400)) ?? .seconds(60)
        if delivery.pacing.retryAfterMinimum > delivery.pacing.retryAfterMaximum {
            report.add(pacingSection.label("retryAfterMinimum"), .conflict, "longer than \(pacingSection.label("retryAfterMaximum"))")
            delivery.pacing.retryAfterMinimum = delivery.pacing.retryAfterMaximum
        }

        let expirySection = root.section("expiry")
        let expiry = ServiceConfiguration.Expiry(
            interval: expirySection.duration(
                "interval", range: .milliseconds(100) ... .seconds(30),
                why: "at most 30s, so that an expired subscription's revoke goes out within a minute") ?? .seconds(15))

        var apps: [String: AppConfiguration] = [:]
        for (name, section) in root.names("apps") {
            do {
                try AppID.validate(name, field: section.path)
            } catch {
                report.add(nil, .invalid, error.message)
                continue
            }
            apps[name] = app(name, section, report: report)
        }
        // One APNs key id is one key: applications of a team share its provider token.
        var apnsKeys: [String: (app: String, key: String)] = [:]
        for (id, app) in apps.sorted(by: { $0.key < $1.key }) {
            guard let apns = app.apns, !apns.teamID.isEmpty, !apns.keyID.isEmpty else { continue }
            let name = apns.teamID + "/" + apns.keyID
            if let first = apnsKeys[name], first.key != apns.privateKey.value {
                report.add(
                    "apps.\(id).apns.privateKey", .invalid, "key \(apns.keyID) of team \(apns.teamID) is another key in apps.\(first.app).apns; one key id is one key "
                        + "(the applications of a team share its provider token)")
            } else if apnsKeys[name] == nil {
                apnsKeys[name] = (id, apns.privateKey.value)
            }
        }
        var configuration = ServiceConfiguration(
            store: store, ingest: ingest, http: http, delivery: delivery, expiry: expiry, apps: apps, baseDirectory: baseDirectory)
        let history = root.section("operations").section("history")
        // `0` (or `0s`) turns the history off: the number is accepted as a duration there.
        let maxAge: Duration? =
            if case .int(0) = history.value("maxAge") { .zero } else {
                history.duration("maxAge", range: .zero ... .seconds(366 * 86_400), why: "0 (off) to 366d")
            }
        configuration.operations.history = HistoryLimits(
            maxAge: (maxAge ?? .seconds(7 * 86_400)).wholeMilliseconds,
            maxRows: Int(history.integer("maxRows", range: 0...1_000_000_000, expected: "0 (off) to 1000000000") ?? 1_000_000))
        let instanceSection = root.section("instance")
        if let name = instanceSection.string("name") {
            if name.utf8.count > 64 || name.isEmpty || !name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0)) }) {
                report.add(instanceSection.label("name"), .invalid, "expected 1 to 64 characters among letters, digits, '.', '_' and '-'")
            } else {
                configuration.instanceName = name
                configuration.instanceNamePinned = true
            }
        }
        if let timeout = instanceSection.duration(
            "shutdownTimeout", range: .seconds(1) ... .seconds(3600),
            why: "1s to 1h: the longest a graceful stop may take before what is left is cancelled")
        {
            configuration.shutdownTimeout = timeout
        }
        if let mode = instanceSection.string("mode") {
            switch (mode, store) {
            case ("single", _):
                configuration.instanceMode = .single
            case ("shared", .postgres):
                configuration.instanceMode = .shared
            case ("shared", .sqlite):
                report.add(
                    instanceSection.label("mode"), .invalid, "shared needs store.postgres (several instances share one PostgreSQL database); "
                        + "a SQLite store serves a single instance")
            default:
                report.add(instanceSection.label("mode"), .invalid, "expected single (this process alone on its store) or shared (one of several instances on store.postgres)")
            }
        }
        return configuration
    }

    func app(_ id: String, _ section: Section, report: ProblemReport) -> AppConfiguration {
        var auth: AppConfiguration.Auth?
        if section.has("auth") {
            let authSection = section.section("auth")
            let secret = authSection.secret("hs256Secret", category: .authentication)
            let jwks = authSection.path("jwks", mustExist: true, category: .authentication)
            switch (secret, jwks) {
            case (.some, .some):
                report.add(authSection.path, .conflict, "give either hs256Secret or jwks, not both", category: .authentication)
            case (nil, nil) where !authSection.has("hs256Secret") && !authSection.has("jwks"):
                report.add(
                    authSection.path, .invalid, "give hs256Secret or jwks to verify the REST API's bearer tokens", category: .authentication)
            default:
                break
            }
            if let secret, secret.value.utf8.count < 32 {
                report.add(
                    authSection.label("hs256Secret"), .invalid, "\(secret.value.utf8.count) bytes; HS256 needs at least 32 (RFC 7518 §3.2)",
                    category: .authentication)
            }
            auth = .init(
                hs256Secret: secret, jwks: jwks, issuer: authSection.nonEmptyString("issuer"),
                audience: authSection.nonEmptyString("audience"),
                leeway: authSection.duration("leeway", range: .zero ... .seconds(3600)) ?? .seconds(60))
        }
        var fcm: AppConfiguration.FCM?
        if section.has("fcm") {
            let fcmSection = section.section("fcm")
            let account = fcmSection.serviceAccountFile("serviceAccountFile")
            if account == nil && !fcmSection.has("serviceAccountFile") {
                report.add("\(fcmSection.path).serviceAccountFile", .missing, "missing; the Google service-account key file of the Firebase project")
            }
            fcm = .init(
                serviceAccountFile: account ?? "", endpoint: fcmSection.url("endpoint") ?? "https://fcm.googleapis.com")
        }
        var hms: AppConfiguration.HMS?
        if section.has("hms") {
            let hmsSection = section.section("hms")
            let clientID = hmsSection.nonEmptyString("clientId")
            if clientID == nil && !hmsSection.has("clientId") {
                report.add("\(hmsSection.path).clientId", .missing, "missing; the app's client ID from AppGallery Connect")
            }
            let clientSecret = hmsSection.secret("clientSecret")
            if clientSecret == nil && !hmsSection.has("clientSecret") {
                report.add("\(hmsSection.path).clientSecret", .missing, "missing; the app's client secret from AppGallery Connect")
            }
            hms = .init(
                clientID: clientID ?? "", clientSecret: clientSecret ?? Secret(""),
                endpoint: hmsSection.url("endpoint") ?? "https://push-api.cloud.huawei.com",
                tokenEndpoint: hmsSection.url("tokenEndpoint") ?? "https://oauth-login.cloud.huawei.com/oauth2/v3/token")
        }
        let apns = section.has("apns") ? apns(section.section("apns"), report: report) : nil
        let webpush = section.has("webpush") ? webpush(section.section("webpush"), report: report) : nil
        var webhooks: [String: AppConfiguration.Webhook] = [:]
        for (name, webhookSection) in section.names("webhooks") {
            if name.isEmpty || name.utf8.count > 128 || name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                report.add(webhookSection.path, .invalid, "a webhook name is 1 to 128 bytes without control characters")
                continue
            }
            let url = webhookSection.url("url")
            if url == nil && !webhookSection.has("url") { report.add("\(webhookSection.path).url", .missing, "missing; the endpoint to POST to") }
            let secret = webhookSection.secret("secret")
            if secret == nil && !webhookSection.has("secret") {
                report.add("\(webhookSection.path).secret", .missing, "missing; webhooks are signed (Standard Webhooks)")
            }
            if let secret, (try? WebhookSecret(secret.value)) == nil {
                report.add("\(webhookSection.path).secret", .invalid, "\(WebhookSecretError().description)")
            }
            webhooks[name] = .init(url: url ?? "", secret: secret ?? Secret(""), pacing: webhookSection.rate("pacing"))
        }
        let lifetimes = section.section("subscriptions")
        let maxLifetime = lifetimes.duration("maxLifetime", range: .seconds(1) ... .seconds(3650 * 86_400)) ?? .seconds(30 * 86_400)
        var defaultLifetime = lifetimes.duration("defaultLifetime", range: .seconds(1) ... .seconds(3650 * 86_400)) ?? .seconds(7 * 86_400)
        if defaultLifetime > maxLifetime {
            report.add(lifetimes.label("defaultLifetime"), .conflict, "longer than maxLifetime")
            defaultLifetime = maxLifetime
        }
        var subscriptions = AppConfiguration.Subscriptions(
            defaultLifetime: defaultLifetime, maxLifetime: maxLifetime,
            maxWeight: Int(lifetimes.size("maxWeight", range: 1...(1 << 30)) ?? 1 << 20))
        if let maxPerUser = lifetimes.integer("maxPerUser", range: 1...1_000_000, expected: "a number of subscriptions, 1 to 1000000") { subscriptions.maxPerUser = Int(maxPerUser) }
        let keys = section.path("keys", mustExist: true)
        if let keys { section.warnIfShared("keys", file: keys) }  // symmetric keys and private signing keys
        var app = AppConfiguration(
            id: id, auth: auth, fcm: fcm, hms: hms, apns: apns, webpush: webpush, webhooks: webhooks, keys: keys,
            signingKey: section.nonEmptyString("signingKey"), subscriptions: subscriptions, rules: rules(section, report: report))
        app.pacing = Self.rates(section.section("pacing"))
        if section.has("harmonyos") {
            let harmony = section.section("harmonyos")
            let account = harmony.serviceAccountFile("serviceAccountFile", harmony: true)
            if account == nil && !harmony.has("serviceAccountFile") {
                report.add("\(harmony.path).serviceAccountFile", .missing, "missing; the AppGallery Connect service-account key file (JSON) of the project")
            }
            app.harmonyos = .init(serviceAccountFile: account ?? "", endpoint: harmony.url("endpoint") ?? "https://push-api.cloud.huawei.com")
        }
        return app
    }

    /// The rates of a `pacing` section, by kind of sender (`off`: 0).
    static func rates(_ section: Section) -> [SubscriptionKind: Double] {
        var rates: [SubscriptionKind: Double] = [:]
        for kind in [SubscriptionKind.fcm, .hms, .harmonyos, .apns, .webpush, .webhook] {
            // Keyed by the provider's name, not the subscription kind's (`fcm`, not `mobile`).
            if let rate = section.rate(Provider(kind).rawValue) { rates[kind] = rate }
        }
        return rates
    }

    /// `apps.<id>.apns`: every key checked, the private key parsed (never echoed).
    func apns(_ section: Section, report: ProblemReport) -> AppConfiguration.APNs {
        func required(_ key: String, _ what: String) {
            if !section.has(key) { report.add("\(section.path).\(key)", .missing, "missing; \(what)") }
        }
        required("teamId", "the Apple developer team's 10-character id")
        required("keyId", "the 10-character id of the APNs authentication key (AuthKey_<keyId>.p8)")
        required("privateKey", "the .p8 key (write file:./AuthKey_<keyId>.p8 or env:NAME)")
        required("topic", "the app's bundle id")
        var teamID = section.nonEmptyString("teamId") ?? ""
        var keyID = section.nonEmptyString("keyId") ?? ""
        for (key, value) in [("teamId", teamID), ("keyId", keyID)] where !value.isEmpty && !Self.isAppleID(value) {
            report.add(section.label(key), .invalid, "expected Apple's 10 upper-case letters and digits, got \(quotedString(String(value.prefix(32))))")
            if key == "teamId" { teamID = "" } else { keyID = "" }
        }
        let privateKey = section.secret("privateKey")
        if let privateKey, !teamID.isEmpty, !keyID.isEmpty {
            do {
                _ = try APNsProviderToken(teamID: teamID, keyID: keyID, privateKeyPEM: privateKey.value)
            } catch {
                report.add(section.label("privateKey"), .invalid, "not a PEM P-256 private key (the .p8 file Apple gives, -----BEGIN PRIVATE KEY-----)")
            }
        }
        let topic = section.nonEmptyString("topic") ?? ""
        if !topic.isEmpty, topic.utf8.count > 255 || !topic.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0)) }) {
            report.add(section.label("topic"), .invalid, "expected a bundle id (letters, digits, '.', '-', '_'), got \(quotedString(String(topic.prefix(64))))")
        }
        var environment = AppConfiguration.APNs.Environment.production
        if let text = section.string("environment") {
            if let parsed = AppConfiguration.APNs.Environment(rawValue: text) {
                environment = parsed
            } else {
                report.add(section.label("environment"), .invalid, "expected production or sandbox (the environment the app's device tokens come from), got \(quotedString(String(text.prefix(32))))")
            }
        }
        return AppConfiguration.APNs(
            teamID: teamID, keyID: keyID, privateKey: privateKey ?? Secret(""), topic: topic, environment: environment,
            endpoint: section.url("endpoint") ?? environment.endpoint)
    }

    static func isAppleID(_ text: String) -> Bool {
        text.utf8.count == 10 && text.utf8.allSatisfy { (0x41...0x5A).contains($0) || (0x30...0x39).contains($0) }
    }

    /// `apps.<id>.webpush`: the VAPID key parsed (never echoed), the subject and the allow-list
    /// checked.
    func webpush(_ section: Section, report: ProblemReport) -> AppConfiguration.WebPush {
        if !section.has("vapidPrivateKey") {
            report.add("\(section.path).vapidPrivateKey", .missing, "missing; the application server's P-256 key (file:./vapid.pem, or the base64url raw key)")
        }
        if !section.has("subject") {
            report.add("\(section.path).subject", .missing, "missing; a contact the push services may use (mailto:ops@example.com or https://example.com)")
        }
        let key = section.secret("vapidPrivateKey")
        if let key {
            do {
                _ = try VAPIDKey(text: key.value)
            } catch {
                report.add(section.label("vapidPrivateKey"), .invalid, "\(error)")
            }
        }
        let subject = section.nonEmptyString("subject") ?? ""
        if !subject.isEmpty, !(subject.hasPrefix("mailto:") || subject.hasPrefix("https:")) || subject.utf8.count > 512
            || subject.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F })
        {
            report.add(section.label("subject"), .invalid, "expected a mailto: or https: URI without spaces (RFC 8292), got \(quotedString(String(subject.prefix(64))))")
        }
        var allowedHosts = section.list("allowedHosts")
        if let hosts = allowedHosts {
            let bad = hosts.filter { !WebPushEndpointPolicy.isValidPattern($0) }
            if !bad.isEmpty {
                report.add(section.label("allowedHosts"), .invalid, "\(bad.prefix(3).map { quotedString(String($0.prefix(64))) }.joined(separator: ", ")): expected host names, or *. and a domain")
                allowedHosts = nil
            } else if hosts.isEmpty {
                report.add(section.label("allowedHosts"), .invalid, "empty, so no subscription could be made; list push-service hosts or leave the key out")
            }
        }
        return AppConfiguration.WebPush(
            vapidPrivateKey: key ?? Secret(""), subject: subject, allowedHosts: allowedHosts,
            allowPrivateAddresses: section.boolean("allowPrivateAddresses") ?? false,
            notification: section.has("notification") ? webPushNotification(section.section("notification"), report: report) : nil)
    }

    /// `apps.<id>.webpush.notification`: the Declarative Web Push template, checked.
    func webPushNotification(_ section: Section, report: ProblemReport) -> WebPushNotification? {
        for member in ["title", "navigate"] where !section.has(member) {
            report.add(
                "\(section.path).\(member)", .missing,
                member == "title"
                    ? "missing; the notification's title, e.g. \"{app}: {path} changed\""
                    : "missing; the https:// page the notification opens, e.g. \"https://example.com/app{path}\"")
        }
        guard let title = section.nonEmptyString("title"), let navigate = section.nonEmptyString("navigate") else { return nil }
        do {
            return try WebPushNotification(
                title: title, body: section.string("body") ?? "", navigate: navigate, field: section.string("field"),
                mutable: section.boolean("mutable") ?? false)
        } catch {
            report.add(section.label(error.member), .invalid, error.reason)
            return nil
        }
    }

    /// `apps.<id>.rules`: a rules file, or the rules document inline (SPEC §12).
    func rules(_ section: Section, report: ProblemReport) -> ConfiguredRules? {
        guard let value = section.value("rules") else { return nil }
        do {
            switch value {
            case .string:
                guard let file = section.path("rules", mustExist: true) else { return nil }
                return try ConfiguredRules.load(file: file)
            case .object:
                return try ConfiguredRules.parse(value, source: "inline")
            default:
                report.add(section.label("rules"), .invalid, "expected a rules file path or the rules object {\"rules\": {…}}, got \(value.typeName)")
                return nil
            }
        } catch {
            report.add(nil, .invalid, error.described(at: section.label("rules")))
            return nil
        }
    }
}

/// The problems found in a configuration, in the order found.
