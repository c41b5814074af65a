/// FCM's `FcmError.errorCode` (`reference/provider-apis.md` §2): the codes the classifier acts
/// on, anything else kept as it came.
public enum FCMErrorCode: Sendable, Hashable {
    case unregistered
    case senderIDMismatch
    case invalidArgument
    case quotaExceeded
    case unavailable
    case `internal`
    case unspecifiedError
    case thirdPartyAuthError
    case apnsAuthError
    case unknown(String)

    public init(_ text: String) {
        switch text {
        case "UNREGISTERED": self = .unregistered
        case "SENDER_ID_MISMATCH": self = .senderIDMismatch
        case "INVALID_ARGUMENT": self = .invalidArgument
        case "QUOTA_EXCEEDED": self = .quotaExceeded
        case "UNAVAILABLE": self = .unavailable
        case "INTERNAL": self = .internal
        case "UNSPECIFIED_ERROR": self = .unspecifiedError
        case "THIRD_PARTY_AUTH_ERROR": self = .thirdPartyAuthError
        case "APNS_AUTH_ERROR": self = .apnsAuthError
        default: self = .unknown(text)
        }
    }
}

/// The `status` of a Google API error (`google.rpc.Code` names) that the FCM classifier acts on
/// when no `FcmError` detail says more.
public enum GoogleRPCStatus: Sendable, Hashable {
    case unauthenticated
    case permissionDenied
    case resourceExhausted
    case unavailable
    case `internal`
    case deadlineExceeded
    case invalidArgument
    case unknown(String)

    public init(_ text: String) {
        switch text {
        case "UNAUTHENTICATED": self = .unauthenticated
        case "PERMISSION_DENIED": self = .permissionDenied
        case "RESOURCE_EXHAUSTED": self = .resourceExhausted
        case "UNAVAILABLE": self = .unavailable
        case "INTERNAL": self = .internal
        case "DEADLINE_EXCEEDED": self = .deadlineExceeded
        case "INVALID_ARGUMENT": self = .invalidArgument
        default: self = .unknown(text)
        }
    }
}

/// HMS Push Kit's result `code` (`reference/provider-apis.md` §4), read whatever the HTTP
/// status (business errors come with 200).
public enum HMSResultCode: Sendable, Hashable {
    /// 80000000.
    case success
    /// 80100000: some tokens failed; `msg` lists them.
    case partialSuccess
    /// 80100001: request parameters refused.
    case parameterError
    /// 80100003: message structure refused.
    case structureError
    /// 80100017: too many messages at once.
    case tooManyMessages
    /// 80200001: OAuth authentication error.
    case authenticationError
    /// 80200003: the OAuth token expired.
    case tokenExpired
    /// 80300002: the application may not send push.
    case notAllowed
    /// 80300007: every token is invalid.
    case allTokensInvalid
    /// 80300008: the body is larger than the limit.
    case bodyTooLarge
    /// 81000001: an internal error of Push Kit.
    case systemError
    case unknown(String)

    public init(_ text: String) {
        switch text {
        case "80000000": self = .success
        case "80100000": self = .partialSuccess
        case "80100001": self = .parameterError
        case "80100003": self = .structureError
        case "80100017": self = .tooManyMessages
        case "80200001": self = .authenticationError
        case "80200003": self = .tokenExpired
        case "80300002": self = .notAllowed
        case "80300007": self = .allTokensInvalid
        case "80300008": self = .bodyTooLarge
        case "81000001": self = .systemError
        default: self = .unknown(text)
        }
    }
}

/// The `reason` of an APNs answer (`reference/apns-webpush.md` §1.4) that the classifier tells
/// apart; the others are classified by status.
public enum APNsReason: Sendable, Hashable {
    case badDeviceToken
    case deviceTokenNotForTopic
    case topicDisallowed
    case idleTimeout
    case expiredProviderToken
    case unrelatedKeyIdInToken
    case tooManyProviderTokenUpdates
    case unknown(String)

    public init(_ text: String) {
        switch text {
        case "BadDeviceToken": self = .badDeviceToken
        case "DeviceTokenNotForTopic": self = .deviceTokenNotForTopic
        case "TopicDisallowed": self = .topicDisallowed
        case "IdleTimeout": self = .idleTimeout
        case "ExpiredProviderToken": self = .expiredProviderToken
        case "UnrelatedKeyIdInToken": self = .unrelatedKeyIdInToken
        case "TooManyProviderTokenUpdates": self = .tooManyProviderTokenUpdates
        default: self = .unknown(text)
        }
    }
}
