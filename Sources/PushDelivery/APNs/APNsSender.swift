import PushCore

/// APNs directly, for one application (token-based authentication over HTTP/2): a background
/// push per notification (`reference/apns-webpush.md` §1).
///
/// `POST {endpoint}/3/device/{token}` with the provider token shared by every send
/// (``APNsProviderToken``), `apns-push-type: background`, `apns-priority: 5` (10 is an error
/// for a background push), `apns-topic`, and `apns-expiration`: APNs keeps a push for an
/// offline device until the notification's retry window ends, as the service itself would.
/// The body is ``ProviderMessages/apns(data:)``.
public struct APNsSender: NotificationSender {
    public let provider = "apns"
    let baseURL: String
    let topic: String
    public let token: APNsProviderToken
    let context: SenderContext
    /// How long APNs may keep a push for an offline device, from the notification's creation
    /// (seconds).
    let storage: Int64

    /// - Parameters:
    ///   - endpoint: `apps.<id>.apns.endpoint` (by `environment` unless set; tests: a fake).
    ///   - storage: seconds after a notification's creation APNs may still deliver it.
    public init(endpoint: String, topic: String, token: APNsProviderToken, storage: Int64, context: SenderContext) {
        baseURL = endpoint.trimmingTrailingSlashes() + "/3/device/"
        self.topic = topic
        self.token = token
        self.storage = storage
        self.context = context
    }

    public func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome {
        let device = notification.entry.target ?? ""
        guard (try? APNsDeviceToken.canonical(device)) == device else {
            // Checked when the subscription was made; a store filled otherwise (an import) may
            // hold anything, and a path is no place for it.
            return .revokeDeadToken(reason: "the subscription's context is not an APNs device token in hexadecimal")
        }
        let body = ProviderMessages.apns(data: notification.entry.payload)
        let expiration = String(max(0, notification.createdAt / 1_000).saturatingAdding(storage))
        var jwt: String
        do {
            jwt = try token.current(now: now / 1_000)
        } catch {
            return .pause(reason: error.description)
        }
        for attempt in 0..<2 {
            let request = OutgoingRequest(
                url: baseURL + device,
                headers: [
                    ("authorization", "bearer " + jwt), ("apns-push-type", "background"), ("apns-priority", "5"), ("apns-topic", topic),
                    ("apns-expiration", expiration), ("content-type", "application/json"),
                ],
                body: body)
            let answer: ProviderAnswer
            do {
                answer = try await context.send(request, provider: provider)
            } catch {
                return .retry(reason: error.description, retryAfter: nil, slowDown: false)
            }
            let outcome = AnswerClassifier.apns(answer, now: context.clock.now)
            guard case .refreshCredentials(let reason) = outcome else { return outcome }
            if attempt == 1 { return .pause(reason: "APNs refused a renewed provider token: \(reason)") }
            let renewed: String?
            do {
                renewed = try token.renew(after: jwt, now: context.clock.now / 1_000)
            } catch {
                return .pause(reason: error.description)
            }
            guard let renewed else {
                // Younger than 20 minutes: renewing would be refused as too frequent. A clock
                // out of step is the likely cause; the application's APNs sends wait.
                return .retry(
                    reason: reason + " (the provider token is younger than 20 minutes, so it is not renewed yet: check this machine's clock)",
                    retryAfter: nil, slowDown: true)
            }
            jwt = renewed
        }
        return .pause(reason: "unreachable")
    }
}
