import PushCore
import PushContracts
import PushHTTP
import PushJOSE

/// Push Kit v3 for HarmonyOS devices, for one application (issue 34): a background message
/// (`push-type: 6`) carrying the payload as `extraData`, authenticated by a JWT the service
/// account signs itself (HarmonyOS 5 and later no longer accept Push Kit's OAuth).
public struct HarmonySender: NotificationSender {
    public let provider = Provider.harmonyos
    let url: String
    let context: SenderContext
    /// The JWT, signed once and reused for its hour (refreshed 5 minutes before; at once when
    /// Push Kit refuses it), through the cache the OAuth providers use.
    public let tokens: AccessTokenCache
    /// The service account and project: who the operator must look at.
    public let identity: String

    /// - Parameter endpoint: `apps.<id>.harmonyos.endpoint` (tests: a local fake).
    public init(account: HarmonyServiceAccount, endpoint: String, context: SenderContext) {
        identity = "\(account.subAccount) (project \(account.projectID))"
        url = endpoint.trimmingTrailingSlashes() + "/v3/\(account.projectID)/messages:send"
        self.context = context
        tokens = AccessTokenCache(clock: context.clock) { () async throws(AnswerClassifier.OAuthFailure) in
            do {
                return AnswerClassifier.AccessToken(token: try account.jwt(now: context.clock.now / 1_000), expiresIn: HarmonyServiceAccount.lifetime)
            } catch {
                throw .credentials(reason: "the Push Kit service-account key cannot sign: \(error)")
            }
        }
    }

    func request(_ jwt: String, body: [UInt8]) -> OutgoingRequest {
        OutgoingRequest(
            url: url, headers: [("authorization", "Bearer " + jwt), ("content-type", "application/json; charset=UTF-8"), ("push-type", "6")], body: body)
    }

    public func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome {
        let deviceToken = notification.entry.target ?? ""
        let body = ProviderMessages.harmony(token: deviceToken, data: notification.entry.payload)
        return await sendWithToken(
            provider: provider, tokens: tokens, context: context, request: { request($0, body: body) },
            classify: { AnswerClassifier.harmony($0, token: deviceToken, now: $1) })
    }

    public func start(_ notification: StoredNotification, now: Int64, completion: @escaping @Sendable (DeliveryOutcome) -> Void) -> Bool {
        let deviceToken = notification.entry.target ?? ""
        let body = ProviderMessages.harmony(token: deviceToken, data: notification.entry.payload)
        let sender = self
        return startWithToken(
            provider: provider, tokens: tokens, context: context, request: { sender.request($0, body: body) },
            classify: { AnswerClassifier.harmony($0, token: deviceToken, now: $1) }, completion: completion)
    }
}
