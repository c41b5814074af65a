import PushCore
import PushContracts
import PushHTTP

/// APNs directly, for one application (token-based authentication over HTTP/2): a background
/// push per notification (`reference/apns-webpush.md` §1).
///
/// `POST {endpoint}/3/device/{token}` with the provider token shared by every send
/// (``APNsProviderToken``), `apns-push-type: background`, `apns-priority: 5` (10 is an error
/// for a background push), `apns-topic`, and `apns-expiration`: APNs keeps a push for an
/// offline device until the notification's retry window ends, as the service itself would.
/// The body is ``ProviderMessages/apns(data:)``.
public struct APNsSender: NotificationSender {
    public let provider = Provider.apns
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

    /// What a send needs before its first request.
    struct Prepared: Sendable {
        var device: String
        var body: [UInt8]
        var expiration: String
        var jwt: String
    }

    /// What a send needs, or the outcome when it cannot be made.
    func prepare(_ notification: StoredNotification, now: Int64) -> Result<Prepared, Stop> {
        let device = notification.entry.target ?? ""
        guard (try? APNsDeviceToken.canonical(device)) == device else {
            // Checked when the subscription was made; a store filled otherwise (an import) may
            // hold anything, and a path is no place for it.
            return .failure(Stop(.revokeDeadToken(reason: "the subscription's context is not an APNs device token in hexadecimal")))
        }
        let body = ProviderMessages.apns(data: notification.entry.payload)
        let expiration = String(max(0, notification.createdAt / 1_000).saturatingAdding(storage))
        do {
            return .success(Prepared(device: device, body: body, expiration: expiration, jwt: try token.current(now: now / 1_000)))
        } catch {
            return .failure(Stop(.pause(reason: error.description)))
        }
    }

    func request(_ prepared: Prepared) -> OutgoingRequest {
        OutgoingRequest(
            url: baseURL + prepared.device,
            headers: [
                ("authorization", "bearer " + prepared.jwt), ("apns-push-type", "background"), ("apns-priority", "5"), ("apns-topic", topic),
                ("apns-expiration", prepared.expiration), ("content-type", "application/json"),
            ],
            body: prepared.body)
    }

    /// An outcome that ends a send before or after its first answer.
    struct Stop: Error {
        var outcome: DeliveryOutcome
        init(_ outcome: DeliveryOutcome) { self.outcome = outcome }
    }

    /// The first answer's outcome (the failure), or, after `ExpiredProviderToken`, the send
    /// renewed to go again at once. A token younger than 20 minutes is not renewed: APNs would
    /// refuse the renewal as too frequent.
    func afterFirstAnswer(_ answer: ProviderAnswer, _ prepared: Prepared) -> Result<Prepared, Stop> {
        let outcome = AnswerClassifier.apns(answer, now: context.clock.now)
        guard case .refreshCredentials(let reason) = outcome else { return .failure(Stop(outcome)) }
        let renewed: String?
        do {
            renewed = try token.renew(after: prepared.jwt, now: context.clock.now / 1_000)
        } catch {
            return .failure(Stop(.pause(reason: error.description)))
        }
        guard let renewed else {
            // A clock out of step is the likely cause; the application's APNs sends wait.
            return .failure(
                Stop(
                    .retry(
                        reason: reason + " (the provider token is younger than 20 minutes, so it is not renewed yet: check this machine's clock)",
                        retryAfter: nil, slowDown: true)))
        }
        var again = prepared
        again.jwt = renewed
        return .success(again)
    }

    /// The send again with a renewed token: a second refusal of the token pauses.
    func resend(_ prepared: Prepared) async -> DeliveryOutcome {
        let answer: ProviderAnswer
        do {
            answer = try await context.send(request(prepared), provider: provider)
        } catch {
            return .unanswered(error)
        }
        let outcome = AnswerClassifier.apns(answer, now: context.clock.now)
        guard case .refreshCredentials(let reason) = outcome else { return outcome }
        return .pause(reason: "APNs refused a renewed provider token: \(reason)")
    }

    public func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome {
        let prepared: Prepared
        switch prepare(notification, now: now) {
        case .failure(let stop): return stop.outcome
        case .success(let ready): prepared = ready
        }
        let answer: ProviderAnswer
        do {
            answer = try await context.send(request(prepared), provider: provider)
        } catch {
            return .unanswered(error)
        }
        switch afterFirstAnswer(answer, prepared) {
        case .failure(let stop): return stop.outcome
        case .success(let renewed): return await resend(renewed)
        }
    }

    /// The first attempt with callbacks alone (see ``NotificationSender/start(_:now:completion:)``);
    /// the attempt with a renewed token, and losses in transit, go on in a task.
    public func start(_ notification: StoredNotification, now: Int64, completion: @escaping @Sendable (DeliveryOutcome) -> Void) -> Bool {
        guard case .success(let prepared) = prepare(notification, now: now) else { return false }
        let sender = self
        return context.start(request(prepared), provider: provider) { result in
            switch result {
            case .failure(let error):
                completion(.unanswered(error))
            case .success(let answer):
                switch sender.afterFirstAnswer(answer, prepared) {
                case .failure(let stop): completion(stop.outcome)
                case .success(let renewed): Task { completion(await sender.resend(renewed)) }
                }
            }
        }
    }
}
