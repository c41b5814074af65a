import Foundation
import PushAPI
import PushCore
import PushDelivery
import PushEngine
import PushJOSE
import PushMatching

/// An application's configuration with its key files read and checked: what the API, the
/// record pipeline and the payload sealers need of it.
struct PreparedApplication: Sendable {
    let id: String
    /// Signing keys and symmetric encryption keys (`apps.<id>.keys`).
    let keys: KeyRing
    /// `apps.<id>.signingKey`; `nil`: the service's own key signs.
    let signingKey: JWK?
    let rules: SubscriptionRules
    let settings: PipelineSettings
    /// Verifies REST bearer tokens; `nil` without `auth` (or when not prepared, for `replay`).
    let verifier: BearerTokenVerifier?

    /// The read rules in force (SPEC §12): the configured ones, or the default.
    let readRules: ReadRules

    /// What the API needs of it; its read rules are evaluated over `trees`.
    func api(trees: any TreeSource, clock: any ServiceClock) -> APIApplication {
        APIApplication(id: id, verifier: verifier, rules: rules, access: RulesAccess(app: id, rules: readRules, trees: trees, clock: clock))
    }

    /// Prepares every application. With `authentication`, the REST API's verifiers too, and the
    /// check that no two applications accept each other's tokens.
    static func prepareAll(_ configuration: ServiceConfiguration, authentication: Bool) throws -> [String: PreparedApplication] {
        var prepared: [String: PreparedApplication] = [:]
        for (id, app) in configuration.apps {
            prepared[id] = try prepare(id, app, authentication: authentication)
        }
        if authentication {
            let verifiers = prepared.values.compactMap { app in app.verifier.map { (app: app.id, verifier: $0) } }
            try checkTokenIsolation(verifiers.sorted { $0.app < $1.app })
        }
        return prepared
    }

    static func prepare(_ id: String, _ app: AppConfiguration, authentication: Bool) throws -> PreparedApplication {
        let path = "apps.\(id)"
        var keys = try KeyRing([])
        if let file = app.keys {
            keys = try Self.keyRing(file, key: "\(path).keys")
        }
        var signingKey: JWK?
        if let kid = app.signingKey {
            guard let key = keys.key(kid: kid, use: .signature) else {
                throw ConfigurationError("\(path).signingKey", .invalid, "no key \(quotedString(kid)) in \(path).keys")
            }
            do {
                _ = try JWSSigner(key: key)
            } catch {
                throw ConfigurationError("\(path).signingKey", .invalid, "\(error)")
            }
            signingKey = key
        }
        var verifier: BearerTokenVerifier?
        if authentication, let auth = app.auth {
            let leeway = auth.leeway.components.seconds
            if let secret = auth.hs256Secret {
                do {
                    verifier = try .hs256(secret: secret.value, issuer: auth.issuer, audience: auth.audience, leeway: leeway)
                } catch {
                    throw ConfigurationError("\(path).auth.hs256Secret", .invalid, "\(error)")
                }
            } else if let file = auth.jwks {
                verifier = BearerTokenVerifier(
                    keys: try Self.keyRing(file, key: "\(path).auth.jwks"), issuer: auth.issuer, audience: auth.audience,
                    leeway: leeway)
            }
        }
        let factory = EventSealerFactory(keys: keys)
        var rules = SubscriptionRules(
            webhooks: Set(app.webhooks.keys), lifetimes: app.subscriptions.lifetimes,
            checkEncryption: { spec throws(RequestError) in try factory.checkEncryption(spec) })
        rules.maxPerUser = app.subscriptions.maxPerUser
        rules.checkContext = Self.contextCheck(id, app)
        return PreparedApplication(
            id: id, keys: keys, signingKey: signingKey, rules: rules,
            settings: PipelineSettings(maxWeight: app.subscriptions.maxWeight, rules: app.rules?.rules, webPushNotification: app.webpush?.notification),
            verifier: verifier,
            readRules: app.readRules)
    }

    /// What the REST API checks of a device subscription's `context` (its shape is checked in
    /// the core): an `apns`, `harmonyos` or `webpush` subscription needs its provider configured (it could
    /// never be delivered otherwise); a browser subscription's keys must be usable and its
    /// endpoint one the application's Web Push policy accepts.
    static func contextCheck(_ id: String, _ app: AppConfiguration) -> @Sendable (SubscriptionKind, String) throws(RequestError) -> Void {
        let apnsConfigured = app.apns != nil
        let harmonyConfigured = app.harmonyos != nil
        let policy = app.webpush?.policy
        return { kind, context throws(RequestError) in
            switch kind {
            case .harmonyos where !harmonyConfigured:
                throw RequestError(
                    .notConfigured, "kind: application \(quotedString(id)) does not send through Push Kit for HarmonyOS (no apps.\(id).harmonyos in the configuration)")
            case .apns where !apnsConfigured:
                throw RequestError(.notConfigured, "kind: application \(quotedString(id)) does not send through APNs (no apps.\(id).apns in the configuration)")
            case .webpush:
                guard let policy else {
                    throw RequestError(.notConfigured, "kind: application \(quotedString(id)) does not send Web Push (no apps.\(id).webpush in the configuration)")
                }
                let subscription = try WebPushContext(context: context)
                do throws(WebPushSubscriberKeys.Invalid) {
                    _ = try WebPushSubscriberKeys(p256dh: subscription.p256dh, auth: subscription.auth)
                } catch {
                    throw RequestError(.invalid, "context.\(error.description)")
                }
                do throws(WebPushEndpointPolicy.Refusal) {
                    _ = try policy.check(subscription.endpoint)
                } catch {
                    throw RequestError(.invalid, "context.endpoint: \(error.description)")
                }
            default:
                break
            }
        }
    }

    /// The sealers of v2 payloads: each application with its signing key or `serviceKey`;
    /// applications absent from the configuration with `fallback`.
    static func sealers(
        _ applications: [String: PreparedApplication], serviceKey: JWK, fallback: SubscriptionSealers.Application? = nil
    ) throws -> SubscriptionSealers {
        let serviceSigner = try JWSSigner(key: serviceKey)
        var byID: [String: SubscriptionSealers.Application] = [:]
        for (id, app) in applications {
            let signer = try app.signingKey.map { try JWSSigner(key: $0) }
            byID[id] = .init(keys: app.keys, signer: signer ?? serviceSigner)
        }
        let empty = try KeyRing([])
        return SubscriptionSealers(applications: byID, fallback: fallback ?? .init(keys: empty, signer: serviceSigner))
    }

    /// A token issued for one application must never act on another (SPEC §11.10). Two
    /// applications whose bearer tokens verify with a common key would accept each other's
    /// tokens unless the claims tell them apart: both must then require distinct audiences
    /// (`aud`) or distinct issuers (`iss`). Such a configuration is refused at start.
    static func checkTokenIsolation(_ verifiers: [(app: String, verifier: BearerTokenVerifier)]) throws {
        func thumbprints(_ verifier: BearerTokenVerifier) -> Set<String> {
            Set(verifier.keys.keys.filter { $0.use != KeyUse.encryption.rawValue }.map(\.thumbprint))
        }
        func distinct(_ a: String?, _ b: String?) -> Bool {
            if let a, let b { return a != b }
            return false
        }
        let prints = verifiers.map { thumbprints($0.verifier) }
        for i in verifiers.indices {
            for j in verifiers.indices where j > i {
                let (a, b) = (verifiers[i], verifiers[j])
                guard !prints[i].isDisjoint(with: prints[j]) else { continue }
                if distinct(a.verifier.audience, b.verifier.audience) || distinct(a.verifier.issuer, b.verifier.issuer) { continue }
                throw ConfigurationError(
                    nil, .conflict,
                    "apps.\(a.app).auth and apps.\(b.app).auth verify bearer tokens with the same key, so a token issued for one "
                        + "application would act on the other; give each application its own hs256Secret or jwks key, or set a "
                        + "different audience (apps.\(a.app).auth.audience, apps.\(b.app).auth.audience) or issuer on both")
            }
        }
    }

    /// A JWK Set file (at most 1 MiB); `key` names the configuration key for messages.
    static func keyRing(_ file: String, key: String) throws -> KeyRing {
        guard let handle = FileHandle(forReadingAtPath: file) else {
            throw ConfigurationError(key, .unreadable, "cannot read the JWK Set \(file)")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: (1 << 20) + 1)) ?? Data()
        guard data.count <= 1 << 20 else {
            throw ConfigurationError(key, .tooLarge, "the JWK Set \(file) is larger than 1 MiB")
        }
        do {
            return try KeyRing(jwkSetText: [UInt8](data))
        } catch {
            throw ConfigurationError(key, .invalid, "\(file): \(error)")
        }
    }
}
