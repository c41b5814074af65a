import PushHTTP

/// What a provider's answer means for the notification and its subscription (SPEC §8). Senders
/// return it; the dispatcher acts on it and never reads a status code.
public enum DeliveryOutcome: Sendable, Equatable {
    /// Accepted. `reference` is the provider's id for the message (FCM `name`, HMS
    /// `requestId`), when it gave one; `status` the HTTP status of the answer.
    case delivered(reference: String?, status: Int? = nil)
    /// A recoverable failure: try again with back-off, never before `retryAfter` (absolute,
    /// milliseconds since the epoch). `slowDown` applies the wait to the whole application's
    /// sender (429, `QUOTA_EXCEEDED`).
    case retry(reason: String, retryAfter: Int64?, slowDown: Bool)
    /// Our access token was refused: refresh it (once, shared) and resend at once.
    case refreshCredentials(reason: String)
    /// The device token is dead: delete the subscription, send it no revoke (a webhook still
    /// gets one).
    case revokeDeadToken(reason: String)
    /// Another fatal answer about this message: delete the subscription and attempt one revoke
    /// notification.
    case revoke(reason: String)
    /// The service's own credentials or configuration are at fault: pause the application's
    /// sender; never revoke a subscription for it.
    case pause(reason: String)
    /// A payload the service built was refused as malformed (a defect of ours, logged loudly):
    /// this notification is dropped, the subscription kept.
    case failed(reason: String)

    /// The `outcome` label of `pushdispatch_deliveries_total` (SPEC §11.13) for this answer.
    public var metricLabel: String {
        switch self {
        case .delivered: "delivered"
        case .retry, .refreshCredentials, .pause: "retry"
        case .revokeDeadToken, .revoke: "revoked"
        case .failed: "failed"
        }
    }

    /// The HTTP status the provider answered with (the delivery history's `status`): for the
    /// other outcomes, read from their reason, which every classifier of an answer begins with
    /// `HTTP nnn` (``AnswerClassifier``); `nil` when no answer came (a transport error, a
    /// token that could not be had, a context the sender refused).
    public var status: Int? {
        if case .delivered(_, let status) = self { return status }
        return Self.answerStatus(reason)?.status
    }

    /// The reason without its `HTTP nnn` prefix (the status is told apart): the provider's error
    /// code and message, or the transport's error; `nil` when delivered or when nothing is left.
    public var detail: String? {
        if case .delivered = self { return nil }
        let reason = self.reason
        guard let answered = Self.answerStatus(reason) else { return reason.isEmpty ? nil : reason }
        let rest = reason[answered.end...].drop { $0 == " " || $0 == ":" }
        return rest.isEmpty ? nil : String(rest)
    }

    /// `HTTP nnn` at the start of `reason`: the status and where the rest starts.
    static func answerStatus(_ reason: String) -> (status: Int, end: String.Index)? {
        let utf8 = reason.utf8
        guard utf8.count >= 8, utf8.starts(with: "HTTP ".utf8) else { return nil }
        var index = utf8.index(utf8.startIndex, offsetBy: 5)
        var status = 0
        for _ in 0..<3 {
            let byte = utf8[index]
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            status = status * 10 + Int(byte - 0x30)
            index = utf8.index(after: index)
        }
        if index != utf8.endIndex {
            let next = utf8[index]
            guard next == 0x20 || next == 0x3A else { return nil }
        }
        return (status, index)
    }

    public var reason: String {
        switch self {
        case .delivered: "delivered"
        case .retry(let reason, _, _), .refreshCredentials(let reason), .revokeDeadToken(let reason), .revoke(let reason),
            .pause(let reason), .failed(let reason):
            reason
        }
    }
}

extension DeliveryOutcome {
    /// A request that got no answer (SPEC §8: connection errors and timeouts are retried).
    static func unanswered(_ error: TransportError) -> DeliveryOutcome {
        .retry(reason: error.description, retryAfter: nil, slowDown: false)
    }
}
