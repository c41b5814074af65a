import PushCore
import PushJOSE
import PushMatching

/// What the API needs to know of one application.
public struct APIApplication: Sendable {
    public let id: String
    /// Verifies bearer tokens; `nil` when the application configures no authentication, in
    /// which case every request is refused (401): there is no anonymous access.
    public let verifier: BearerTokenVerifier?
    public let rules: SubscriptionRules
    /// Who may read which node (SPEC §12): asked at every create and refresh.
    public let access: any ReadAccess

    public init(id: String, verifier: BearerTokenVerifier?, rules: SubscriptionRules, access: any ReadAccess) {
        self.id = id
        self.verifier = verifier
        self.rules = rules
        self.access = access
    }
}
