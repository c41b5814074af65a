import PushCore
import PushContracts
import PushHTTP
import PushJOSE

/// FCM HTTP v1 for one application (SPEC §8).
public struct FCMSender: NotificationSender {
    public let provider = Provider.fcm
    let url: String
    let context: SenderContext
    public let tokens: AccessTokenCache
    /// The service account (`client_email`) and project: who the operator must look at.
    public let identity: String

    /// - Parameter endpoint: `apps.<id>.fcm.endpoint` (tests: a local fake).
    public init(key: ServiceAccountKey, endpoint: String, context: SenderContext) {
        identity = "\(key.clientEmail) (project \(key.projectID))"
        url = endpoint.trimmingTrailingSlashes() + "/v1/projects/\(key.projectID)/messages:send"
        self.context = context
        tokens = AccessTokenCache(clock: context.clock) { () async throws(AnswerClassifier.OAuthFailure) in
            let assertion: String
            do {
                assertion = try key.assertion(now: context.clock.now / 1_000)
            } catch {
                throw .credentials(reason: "the service-account key cannot sign: \(error)")
            }
            return try await tokenRequest(
                context, url: key.tokenURI, form: [("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion)])
        }
    }

    public func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome {
        let body = ProviderMessages.fcm(token: notification.entry.target ?? "", data: notification.entry.payload)
        return await sendWithToken(
            provider: provider, tokens: tokens, context: context,
            request: { token in
                OutgoingRequest(url: url, headers: [("authorization", "Bearer " + token), ("content-type", "application/json; charset=UTF-8")], body: body)
            },
            classify: { AnswerClassifier.fcm($0, now: $1) })
    }

    public func start(_ notification: StoredNotification, now: Int64, completion: @escaping @Sendable (DeliveryOutcome) -> Void) -> Bool {
        let body = ProviderMessages.fcm(token: notification.entry.target ?? "", data: notification.entry.payload)
        let url = url
        return startWithToken(
            provider: provider, tokens: tokens, context: context,
            request: { token in
                OutgoingRequest(url: url, headers: [("authorization", "Bearer " + token), ("content-type", "application/json; charset=UTF-8")], body: body)
            },
            classify: { AnswerClassifier.fcm($0, now: $1) }, completion: completion)
    }
}
