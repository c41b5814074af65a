import PushCore
import PushContracts
import PushHTTP

/// HMS Push Kit for one application (SPEC §8).
public struct HMSSender: NotificationSender {
    public let provider = Provider.hms
    let url: String
    let context: SenderContext
    public let tokens: AccessTokenCache
    /// The OAuth client id (the app id in AppGallery Connect; the secret stays out).
    public let identity: String

    public init(clientID: String, clientSecret: String, endpoint: String, tokenEndpoint: String, context: SenderContext) {
        identity = "client \(clientID)"
        url = endpoint.trimmingTrailingSlashes() + "/v1/\(clientID)/messages:send"
        self.context = context
        tokens = AccessTokenCache(clock: context.clock) { () async throws(AnswerClassifier.OAuthFailure) in
            try await tokenRequest(
                context, url: tokenEndpoint, form: [("grant_type", "client_credentials"), ("client_id", clientID), ("client_secret", clientSecret)])
        }
    }

    public func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome {
        let deviceToken = notification.entry.target ?? ""
        let body = ProviderMessages.hms(token: deviceToken, data: notification.entry.payload)
        return await sendWithToken(
            provider: provider, tokens: tokens, context: context,
            request: { token in
                OutgoingRequest(url: url, headers: [("authorization", "Bearer " + token), ("content-type", "application/json; charset=UTF-8")], body: body)
            },
            classify: { AnswerClassifier.hms($0, token: deviceToken, now: $1) })
    }

    public func start(_ notification: StoredNotification, now: Int64, completion: @escaping @Sendable (DeliveryOutcome) -> Void) -> Bool {
        let deviceToken = notification.entry.target ?? ""
        let body = ProviderMessages.hms(token: deviceToken, data: notification.entry.payload)
        let url = url
        return startWithToken(
            provider: provider, tokens: tokens, context: context,
            request: { token in
                OutgoingRequest(url: url, headers: [("authorization", "Bearer " + token), ("content-type", "application/json; charset=UTF-8")], body: body)
            },
            classify: { AnswerClassifier.hms($0, token: deviceToken, now: $1) }, completion: completion)
    }
}
