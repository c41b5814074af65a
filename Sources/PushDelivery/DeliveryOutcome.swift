import PushHTTP

/// What a provider's answer means for the notification and its subscription (SPEC §8). Senders
/// return it; the dispatcher acts on it and never reads a status code.
public enum DeliveryOutcome: Sendable, Equatable {
    /// Accepted. `reference` is the provider's id for the message (FCM `name`, HMS
    /// `requestId`), when it gave one.
    case delivered(reference: String?)
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
