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

    /// What a send needs before its first request, or the outcome when it cannot be made.
    enum Preparation {
        case ready(device: String, body: [UInt8], expiration: String, jwt: String)
        case done(DeliveryOutcome)
    }

    func prepare(_ notification: StoredNotification, now: Int64) -> Preparation {
        let device = notification.entry.target ?? ""
        guard (try? APNsDeviceToken.canonical(device)) == device else {
            // Checked when the subscription was made; a store filled otherwise (an import) may
            // hold anything, and a path is no place for it.
            return .done(.revokeDeadToken(reason: "the subscription's context is not an APNs device token in hexadecimal"))
        }
        let body = ProviderMessages.apns(data: notification.entry.payload)
        let expiration = String(max(0, notification.createdAt / 1_000).saturatingAdding(storage))
        do {
            return .ready(device: device, body: body, expiration: expiration, jwt: try token.current(now: now / 1_000))
        } catch {
            return .done(.pause(reason: error.description))
        }
    }

    func request(device: String, body: [UInt8], expiration: String, jwt: String) -> OutgoingRequest {
        OutgoingRequest(
            url: baseURL + device,
            headers: [
                ("authorization", "bearer " + jwt), ("apns-push-type", "background"), ("apns-priority", "5"), ("apns-topic", topic),
                ("apns-expiration", expiration), ("content-type", "application/json"),
            ],
            body: body)
    }

    /// After `ExpiredProviderToken` on `jwt`: the token to send with again, or the outcome.
    func renewal(after jwt: String, reason: String) -> Result<String, Stop> {
        let renewed: String?
        do {
            renewed = try token.renew(after: jwt, now: context.clock.now / 1_000)
        } catch {
            return .failure(Stop(.pause(reason: error.description)))
        }
        guard let renewed else {
            // Younger than 20 minutes: renewing would be refused as too frequent. A clock out of
            // step is the likely cause; the application's APNs sends wait.
            return .failure(
                Stop(
                    .retry(
                        reason: reason + " (the provider token is younger than 20 minutes, so it is not renewed yet: check this machine's clock)",
                        retryAfter: nil, slowDown: true)))
        }
        return .success(renewed)
    }

    /// An outcome that ends a send (as the failure of ``renewal(after:reason:)``).
    struct Stop: Error {
        var outcome: DeliveryOutcome
        init(_ outcome: DeliveryOutcome) { self.outcome = outcome }
    }

    public func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome {
        let device: String
        let body: [UInt8]
        let expiration: String
        var jwt: String
        switch prepare(notification, now: now) {
        case .done(let outcome): return outcome
        case .ready(let preparedDevice, let preparedBody, let preparedExpiration, let preparedJWT):
            (device, body, expiration, jwt) = (preparedDevice, preparedBody, preparedExpiration, preparedJWT)
        }
        for attempt in 0..<2 {
            let answer: ProviderAnswer
            do {
                answer = try await context.send(request(device: device, body: body, expiration: expiration, jwt: jwt), provider: provider)
            } catch {
                return .retry(reason: error.description, retryAfter: nil, slowDown: false)
            }
            let outcome = AnswerClassifier.apns(answer, now: context.clock.now)
            guard case .refreshCredentials(let reason) = outcome else { return outcome }
            if attempt == 1 { return .pause(reason: "APNs refused a renewed provider token: \(reason)") }
            switch renewal(after: jwt, reason: reason) {
            case .success(let renewed): jwt = renewed
            case .failure(let stop): return stop.outcome
            }
        }
        return .pause(reason: "unreachable")
    }

    /// The first attempt with callbacks alone (see ``NotificationSender/start(_:now:completion:)``);
    /// a renewed token's attempt, and losses in transit, go on in a task.
    public func start(_ notification: StoredNotification, now: Int64, completion: @escaping @Sendable (DeliveryOutcome) -> Void) -> Bool {
        guard case .ready(let device, let body, let expiration, let jwt) = prepare(notification, now: now) else { return false }
        let sender = self
        return context.start(request(device: device, body: body, expiration: expiration, jwt: jwt), provider: provider) { result in
            let answer: ProviderAnswer
            switch result {
            case .failure(let error):
                completion(.retry(reason: error.description, retryAfter: nil, slowDown: false))
                return
            case .success(let received):
                answer = received
            }
            let outcome = AnswerClassifier.apns(answer, now: sender.context.clock.now)
            guard case .refreshCredentials(let reason) = outcome else {
                completion(outcome)
                return
            }
            switch sender.renewal(after: jwt, reason: reason) {
            case .failure(let stop):
                completion(stop.outcome)
            case .success(let renewed):
                Task {
                    let answer: ProviderAnswer
                    do throws(TransportError) {
                        answer = try await sender.context.send(
                            sender.request(device: device, body: body, expiration: expiration, jwt: renewed), provider: sender.provider)
                    } catch {
                        completion(.retry(reason: error.description, retryAfter: nil, slowDown: false))
                        return
                    }
                    let outcome = AnswerClassifier.apns(answer, now: sender.context.clock.now)
                    if case .refreshCredentials(let reason) = outcome {
                        completion(.pause(reason: "APNs refused a renewed provider token: \(reason)"))
                    } else {
                        completion(outcome)
                    }
                }
            }
        }
    }
}
