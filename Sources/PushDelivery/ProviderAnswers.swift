import PushCore
import PushJSON
import PushHTTP

/// The classification of provider answers (SPEC §8 table; `reference/provider-apis.md` §2, §4,
/// §7). Pure functions of the answer: table-driven tests cover every row.
public enum AnswerClassifier {
    // MARK: - FCM

    /// An FCM HTTP v1 `messages:send` answer. Classified by the first `FcmError.errorCode`,
    /// then the top-level `status`, then the HTTP status.
    public static func fcm(_ answer: ProviderAnswer, now: Int64) -> DeliveryOutcome {
        let retryAfter = RetryAfter.parse(answer.retryAfter, now: now)
        let json = try? JSONParser.parse(answer.body)
        if (200..<300).contains(answer.status) {
            return .delivered(reference: json?["name"]?.stringValue, status: answer.status)
        }
        let error = json?["error"]
        let message = error?["message"]?.stringValue ?? ""
        let status = error?["status"]?.stringValue
        var errorCode: String?
        var violations: [String] = []
        for detail in error?["details"]?.arrayValue ?? [] {
            let type = detail["@type"]?.stringValue ?? ""
            if type.hasSuffix("google.firebase.fcm.v1.FcmError"), errorCode == nil {
                errorCode = detail["errorCode"]?.stringValue
            }
            if type.hasSuffix("google.rpc.BadRequest") {
                for violation in detail["fieldViolations"]?.arrayValue ?? [] {
                    if let field = violation["field"]?.stringValue { violations.append(field) }
                }
            }
        }
        let summary = describe(http: answer.status, code: errorCode ?? status, message: message)
        let aboutToken =
            violations.contains("message.token") || message.lowercased().contains("registration token")

        switch errorCode.map(FCMErrorCode.init) {
        case .unregistered, .senderIDMismatch:
            return .revokeDeadToken(reason: summary)
        case .invalidArgument:
            return aboutToken ? .revokeDeadToken(reason: summary) : .failed(reason: summary)
        case .quotaExceeded:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: true)
        case .unavailable, .internal, .unspecifiedError:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        case .thirdPartyAuthError, .apnsAuthError:
            return .pause(reason: summary)
        case .unknown, nil:
            break
        }
        switch status.map(GoogleRPCStatus.init) {
        case .unauthenticated:
            return .refreshCredentials(reason: summary)
        case .permissionDenied:
            return .pause(reason: summary)
        case .resourceExhausted:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: true)
        case .unavailable, .internal, .deadlineExceeded:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        case .invalidArgument:
            return aboutToken ? .revokeDeadToken(reason: summary) : .failed(reason: summary)
        case .unknown, nil:
            break
        }
        return byHTTPStatus(answer.status, summary: summary, retryAfter: retryAfter)
    }

    /// The HTTP-status fallback shared by FCM and HMS: what an answer means when its body says
    /// nothing we know.
    static func byHTTPStatus(_ status: Int, summary: String, retryAfter: Int64?) -> DeliveryOutcome {
        switch status {
        case 429:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: true)
        case 408, 500...599:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        case 401:
            return .refreshCredentials(reason: summary)
        case 403:
            // Permission denied without a per-token error: the service account's rights.
            return .pause(reason: summary)
        case 404:
            // A 404 without UNREGISTERED is a wrong endpoint or project: ours, not the device's.
            return .pause(reason: summary)
        case 400...499:
            // Another fatal answer about this message (FCM FAILED_PRECONDITION, …): SPEC §8
            // revokes and attempts one revoke notification. Only a refusal of the payload's
            // shape or size (`INVALID_ARGUMENT` not about the token, HMS 80100001/80100003/
            // 80300008) is our defect; those are told apart before this fallback.
            return .revoke(reason: summary)
        default:
            // 1xx, 3xx and nonsense: an endpoint that is not the provider.
            return .pause(reason: summary)
        }
    }

    // MARK: - HMS

    /// An HMS Push Kit `messages:send` answer for one device token. `code` is read whatever the
    /// HTTP status (business errors come with 200).
    public static func hms(_ answer: ProviderAnswer, token: String, now: Int64) -> DeliveryOutcome {
        let retryAfter = RetryAfter.parse(answer.retryAfter, now: now)
        let json = try? JSONParser.parse(answer.body)
        let code: String? =
            json?["code"]?.stringValue ?? json?["code"]?.integerValue.map { String($0) }
        let message = json?["msg"]?.stringValue ?? ""
        let summary = describe(http: answer.status, code: code, message: message)
        switch answer.status {
        case 502, 504, 500:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        case 503:
            // Traffic control: spread the whole application's sending out.
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: true)
        default:
            break
        }
        switch code.map(HMSResultCode.init) {
        case .success:
            return .delivered(reference: json?["requestId"]?.stringValue, status: answer.status)
        case .partialSuccess:
            // Partial success: `msg` lists the illegal tokens (an escaped JSON string in v1).
            let detail: JSON? =
                if let text = json?["msg"]?.stringValue { try? JSONParser.parse(text) } else { json?["msg"] }
            let illegal = (detail?["illegal_tokens"]?.arrayValue ?? detail?["illegalTokens"]?.arrayValue ?? []).compactMap(\.stringValue)
            if illegal.contains(token) { return .revokeDeadToken(reason: summary) }
            return .delivered(reference: json?["requestId"]?.stringValue, status: answer.status)
        case .authenticationError, .tokenExpired:
            return .refreshCredentials(reason: summary)
        case .notAllowed:
            return .pause(reason: summary)
        case .allTokensInvalid:
            return .revokeDeadToken(reason: summary)
        case .systemError, .tooManyMessages:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        case .parameterError, .structureError, .bodyTooLarge:
            // Parameters, structure or size refused: the payload is ours, so this is a defect.
            return .failed(reason: summary)
        case .unknown:
            return .revoke(reason: summary)
        case nil:
            if (200..<300).contains(answer.status) {
                return .retry(reason: "HMS answered \(answer.status) without a result code", retryAfter: retryAfter, slowDown: false)
            }
            return byHTTPStatus(answer.status, summary: summary, retryAfter: retryAfter)
        }
    }

    // MARK: - Webhooks

    /// A webhook receiver's answer. Only 410 Gone revokes (Standard Webhooks: the endpoint
    /// asks to be disabled); the receiver's other refusals are about the endpoint, not the
    /// subscription: a redirect (not followed), 401/403 (our signature or credentials refused)
    /// and 404 (a deploy in progress, a route being changed) never revoke. The pauses and
    /// slow-downs apply to this webhook destination only (``SenderKey``).
    public static func webhook(_ answer: ProviderAnswer, now: Int64) -> DeliveryOutcome {
        let retryAfter = RetryAfter.parse(answer.retryAfter, now: now)
        let summary = "HTTP \(answer.status)"
        switch answer.status {
        case 200..<300:
            return .delivered(reference: nil, status: answer.status)
        case 410:
            return .revokeDeadToken(reason: summary)
        case 429:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: true)
        case 300..<400, 401, 403:
            return .pause(reason: summary + (answer.status < 400 ? " (redirects are not followed: fix the webhook's url)" : " (the receiver refuses our signature or credentials)"))
        case 413:
            // The receiver's body limit is below what it subscribed to receive: one
            // notification is lost, never the subscription.
            return .failed(reason: summary + " (the receiver refuses the body's size)")
        default:
            // 404 (a deploy), 408, 5xx, other 4xx: the receiver may come back within the window.
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        }
    }

    // MARK: - APNs

    /// An APNs provider API answer (`reference/apns-webpush.md` §1.4): the `reason` of the body
    /// `{"reason": …}` first, then the status. Dead tokens revoke without a notice; our expired
    /// provider token is renewed once and the send repeated; other credential refusals pause the
    /// application's APNs sender; a refusal of what we sent (413, the other 400s) is a defect,
    /// never a revocation.
    public static func apns(_ answer: ProviderAnswer, now: Int64) -> DeliveryOutcome {
        if (200..<300).contains(answer.status) { return .delivered(reference: nil, status: answer.status) }
        let retryAfter = RetryAfter.parse(answer.retryAfter, now: now)
        let reason = (try? JSONParser.parse(answer.body))?["reason"]?.stringValue
        let summary = describe(http: answer.status, code: reason, message: "")
        switch (answer.status, reason.map(APNsReason.init)) {
        case (410, _), (400, .badDeviceToken), (400, .deviceTokenNotForTopic):
            return .revokeDeadToken(reason: summary)
        case (400, .topicDisallowed):
            return .pause(reason: summary + " (apns.topic is not allowed for this key)")
        case (400, .idleTimeout):
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        case (403, .expiredProviderToken):
            return .refreshCredentials(reason: summary)
        case (403, .unrelatedKeyIdInToken):
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        case (403, _), (401, _):
            return .pause(reason: summary + " (the provider token or key is refused)")
        case (404, _), (405, _):
            // The path is ours and fixed: the endpoint is not APNs's.
            return .pause(reason: summary + " (apns.endpoint does not answer as APNs)")
        case (429, .tooManyProviderTokenUpdates):
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: true)
        case (429, _):
            // TooManyRequests: this device token, not the application.
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        case (408, _), (500...599, _):
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        case (400...499, _):
            // 413 PayloadTooLarge and the other refusals of the request we built.
            return .failed(reason: summary)
        default:
            return .pause(reason: summary + " (not an APNs answer)")
        }
    }

    // MARK: - Web Push

    /// A push service's answer (RFC 8030; `reference/apns-webpush.md` §2.4). 201 delivered;
    /// 404/410 the subscription is gone; 413 a defect (the body is ours); 429 slows the
    /// application's Web Push sending down, honouring `Retry-After`; 401/403 our VAPID
    /// credentials refused (paused); 5xx and anything else retried within the window.
    public static func webPush(_ answer: ProviderAnswer, now: Int64) -> DeliveryOutcome {
        if (200..<300).contains(answer.status) { return .delivered(reference: nil, status: answer.status) }
        let retryAfter = RetryAfter.parse(answer.retryAfter, now: now)
        let summary = "HTTP \(answer.status)"
        switch answer.status {
        case 404, 410:
            return .revokeDeadToken(reason: summary)
        case 400, 413:
            return .failed(reason: summary + (answer.status == 413 ? " (the push service refuses the body's size)" : " (the push service refuses the request)"))
        case 401, 403:
            return .pause(reason: summary + " (the push service refuses our VAPID credentials)")
        case 429:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: true)
        default:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        }
    }

    // MARK: - OAuth

    /// An access token and how long it lives.
    public struct AccessToken: Sendable, Equatable {
        public var token: String
        /// Seconds.
        public var expiresIn: Int64
    }

    /// An OAuth token endpoint's answer (Google's JWT bearer grant, HMS client credentials):
    /// the token, or what its failure means for the sends waiting on it.
    public static func oauth(_ answer: ProviderAnswer, now: Int64) -> Result<AccessToken, OAuthFailure> {
        let retryAfter = RetryAfter.parse(answer.retryAfter, now: now)
        let json = try? JSONParser.parse(answer.body)
        if (200..<300).contains(answer.status) {
            guard let token = json?["access_token"]?.stringValue, !token.isEmpty, token.utf8.count <= 8192 else {
                return .failure(.retry(reason: "the token endpoint answered \(answer.status) without an access_token", retryAfter: retryAfter))
            }
            // It goes into every request's `authorization` field: visible ASCII only (RFC 6750
            // §2.1 is narrower still), or no field could carry it.
            guard token.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                return .failure(.retry(reason: "the token endpoint answered \(answer.status) with an access_token a header cannot carry", retryAfter: retryAfter))
            }
            let expires = json?["expires_in"]?.integerValue ?? json?["expires_in"]?.stringValue.flatMap { Int64($0) } ?? 3600
            return .success(AccessToken(token: token, expiresIn: min(max(expires, 0), 86_400)))
        }
        let error = json?["error"]
        let code = error?.stringValue ?? error?.integerValue.map { String($0) }
        let description = json?["error_description"]?.stringValue ?? ""
        let summary = describe(http: answer.status, code: code, message: description)
        if let code, ["internal_failure", "server_error", "temporarily_unavailable"].contains(code) {
            return .failure(.retry(reason: summary, retryAfter: retryAfter))
        }
        switch answer.status {
        case 408, 429, 500...599:
            return .failure(.retry(reason: summary, retryAfter: retryAfter))
        default:
            // invalid_grant, invalid_client, invalid_scope, HMS 1101 …: our credentials.
            return .failure(.credentials(reason: summary))
        }
    }

    /// Why no access token could be had.
    public enum OAuthFailure: Error, Sendable, Equatable {
        /// The token endpoint is unavailable for now.
        case retry(reason: String, retryAfter: Int64?)
        /// The credentials are refused: the application is paused.
        case credentials(reason: String)
    }

    /// `HTTP 404 UNREGISTERED: Requested entity was not found.`, the message cut to a bounded
    /// length (provider messages can echo what we sent).
    static func describe(http: Int, code: String?, message: String) -> String {
        var text = "HTTP \(http)"
        if let code { text += " " + bounded(code, 64) }
        if !message.isEmpty { text += ": " + bounded(message, 200) }
        return text
    }

    /// `text` cut to at most `limit` bytes of UTF-8 (then `…`), control characters as spaces.
    /// Bytes, not characters: 200 four-byte characters would be 800 bytes.
    static func bounded(_ text: String, _ limit: Int) -> String {
        var result = String.UnicodeScalarView()
        var count = 0
        for scalar in text.unicodeScalars {
            let size = scalar.utf8.count
            if count + size > limit {
                result.append("…")
                break
            }
            result.append(scalar.properties.generalCategory == .control ? " " : scalar)
            count += size
        }
        return String(result)
    }
}
