import PushCore

/// What an operator needs to know of one application's credentials for one provider (the
/// operations overview, SPEC §13.3): whose they are, whether the token they give is held and
/// until when, and the last refusal. Nothing secret: identities are the non-secret halves
/// (a service account's e-mail, a client id, APNs's team and key ids, a VAPID public key).
public struct CredentialHealth: Sendable, Equatable {
    public enum State: String, Sendable {
        /// A token is held and valid (or, for VAPID, the key signs).
        case ok
        /// Nothing was sent yet: no token was asked for.
        case unused
        /// The token held is past its life: the next send asks for a new one.
        case idle
        /// The last attempt to get a token failed (after the last success).
        case failing
        /// The provider refuses the credentials: the sender is paused (set by the overview,
        /// which knows the pauses).
        case refused
    }

    public var app: String
    public var provider: Provider
    /// `oauth` (FCM, HMS: an access token fetched with the credentials), `jwt` (APNs: a
    /// provider token signed with the `.p8` key), `vapid` (Web Push: a JWT per push service).
    public var mechanism: String
    public var identity: String
    public var state: State
    /// Milliseconds since the epoch.
    public var issuedAt: Int64?
    public var expiresAt: Int64?
    /// When it is renewed (before it expires).
    public var renewsAt: Int64?
    public var failedAt: Int64?
    public var failure: String?
    /// Web Push: the push services (origins) a header is signed for now.
    public var origins: Int?

    public init(app: String, provider: Provider, mechanism: String, identity: String, state: State) {
        self.app = app
        self.provider = provider
        self.mechanism = mechanism
        self.identity = identity
        self.state = state
    }

    /// An OAuth token cache's state at `now` (milliseconds).
    static func oauth(
        app: String, provider: Provider, identity: String, fetches: AccessTokenCache.FetchHistory, now: Int64, mechanism: String = "oauth"
    ) -> CredentialHealth {
        let state: State
        if let failed = fetches.failedAt, failed >= (fetches.fetchedAt ?? .min) {
            state = .failing
        } else if fetches.fetchedAt == nil {
            state = .unused
        } else if let expires = fetches.expiresAt, now < expires {
            state = .ok
        } else {
            state = .idle
        }
        var health = CredentialHealth(app: app, provider: provider, mechanism: mechanism, identity: identity, state: state)
        health.issuedAt = fetches.fetchedAt
        health.expiresAt = fetches.expiresAt
        health.renewsAt = fetches.refreshAt
        health.failedAt = fetches.failedAt
        health.failure = fetches.failure
        return health
    }

    /// An APNs provider token at `now` (milliseconds): APNs refuses one older than an hour.
    static func apns(app: String, token: APNsProviderToken, now: Int64) -> CredentialHealth {
        let issued = token.issuedAt.map { $0.saturatingMultiplying(1_000) }
        let state: State =
            switch issued {
            case nil: .unused
            case let issued? where now.saturatingSubtracting(issued) < 3_600_000: .ok
            default: .idle
            }
        var health = CredentialHealth(app: app, provider: .apns, mechanism: "jwt", identity: "team \(token.teamID), key \(token.keyID)", state: state)
        health.issuedAt = issued
        health.expiresAt = issued.map { $0.saturatingAdding(3_600_000) }
        health.renewsAt = issued.map { $0.saturatingAdding(APNsProviderToken.renewalAge.saturatingMultiplying(1_000)) }
        return health
    }
}

extension ApplicationSenders {
    /// The credentials of application `app` at `now` (milliseconds), by provider. Webhooks
    /// sign with a shared secret that neither expires nor is fetched: they have no entry.
    public func credentials(app: String, now: Int64) -> [CredentialHealth] {
        var all: [CredentialHealth] = []
        if let fcm { all.append(.oauth(app: app, provider: .fcm, identity: fcm.identity, fetches: fcm.tokens.fetches, now: now)) }
        if let hms { all.append(.oauth(app: app, provider: .hms, identity: hms.identity, fetches: hms.tokens.fetches, now: now)) }
        if let harmonyos {
            // A JWT the service signs itself: "fetched" is when it was signed.
            all.append(.oauth(app: app, provider: .harmonyos, identity: harmonyos.identity, fetches: harmonyos.tokens.fetches, now: now, mechanism: "jwt"))
        }
        if let apns { all.append(.apns(app: app, token: apns.token, now: now)) }
        if let webpush {
            let signed = webpush.headers.signed
            var health = CredentialHealth(app: app, provider: .webpush, mechanism: "vapid", identity: "public key \(webpush.vapid.publicKeyText)", state: .ok)
            health.origins = signed.origins
            health.expiresAt = signed.soonest.map { $0.saturatingMultiplying(1_000) }
            health.renewsAt = signed.soonest.map { $0.saturatingSubtracting(VAPIDHeaders.margin).saturatingMultiplying(1_000) }
            all.append(health)
        }
        return all
    }
}

extension SenderTable {
    /// Every application's credentials at `now`, by application then provider.
    public func credentials(now: Int64) -> [CredentialHealth] {
        applications.sorted { $0.key < $1.key }.flatMap { $0.value.credentials(app: $0.key, now: now) }
    }
}
