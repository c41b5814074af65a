import PushCore
import PushHTTP
import PushJSON

/// Push Kit v3's result codes (`code`, a string, in every answer), as Huawei documents them
/// for the scenario-specific `messages:send` (`docs/providers-2026.md`).
public enum HarmonyResultCode: Sendable, Hashable {
    /// 80000000.
    case success
    /// 80100000: some tokens failed; `msg` names them by reason.
    case partialSuccess
    /// 80100001: request parameters refused.
    case parameterError
    /// 80100003: the payload refused.
    case payloadError
    /// 80100004: the expiry time is already past.
    case expiryPast
    /// 80200001: authentication refused (the JWT, its project).
    case authenticationError
    /// 80200005: the JWT expired.
    case jwtExpired
    /// 80300002: the application may not push, or the project is another's.
    case notAllowed
    /// 80300007: every token is invalid; `msg` names them by reason.
    case allTokensInvalid
    /// 80300008: the body (tokens excluded) is over 4,096 bytes.
    case bodyTooLarge
    /// 80300010: too many tokens.
    case tooManyTokens
    /// 80300029: test messages over their daily limit.
    case testMessagesExceeded
    /// 80300036: a JWT valid for more than a day.
    case jwtTooLong
    /// 80300037: the application is penalised.
    case penalised
    /// 81000001: an internal error of Push Kit.
    case internalError
    case unknown(String)

    public init(_ text: String) {
        switch text {
        case "80000000": self = .success
        case "80100000": self = .partialSuccess
        case "80100001": self = .parameterError
        case "80100003": self = .payloadError
        case "80100004": self = .expiryPast
        case "80200001": self = .authenticationError
        case "80200005": self = .jwtExpired
        case "80300002": self = .notAllowed
        case "80300007": self = .allTokensInvalid
        case "80300008": self = .bodyTooLarge
        case "80300010", "80300030": self = .tooManyTokens
        case "80300029": self = .testMessagesExceeded
        case "80300036": self = .jwtTooLong
        case "80300037": self = .penalised
        case "81000001": self = .internalError
        default: self = .unknown(text)
        }
    }
}

extension AnswerClassifier {
    /// Why Push Kit refused a token (`msg.illegalTokens`'s keys) that mean the token itself is
    /// dead: malformed, of another platform, or without right after the device moved to
    /// HarmonyOS NEXT (Huawei: "get the push token again"). The other reasons are about the
    /// application (`noPushTypeRight`, `countryNotSupport`, penalties …).
    static let harmonyDeadTokenReasons: Set<String> = ["tokenFormatError", "tokenPlatformNotSupport", "noRight"]

    /// A Push Kit v3 `messages:send` answer for one device token (SPEC §8's classes; the table
    /// is in `docs/providers-2026.md`).
    public static func harmony(_ answer: ProviderAnswer, token: String, now: Int64) -> DeliveryOutcome {
        let retryAfter = RetryAfter.parse(answer.retryAfter, now: now)
        let json = try? JSONParser.parse(answer.body)
        let code: String? = json?["code"]?.stringValue ?? json?["code"]?.integerValue.map { String($0) }
        let message = json?["msg"]?.stringValue ?? ""
        let summary = describe(http: answer.status, code: code, message: message)
        switch answer.status {
        case 500, 502, 504:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        case 503:
            // Traffic control ("distribute the sending speed evenly"): the whole application
            // slows down.
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: true)
        default:
            break
        }
        switch code.map(HarmonyResultCode.init) {
        case .success:
            return .delivered(reference: json?["requestId"]?.stringValue, status: answer.status)
        case .partialSuccess, .allTokensInvalid:
            // `msg` is a JSON string: {"illegalTokens":{"<reason>":["<token>",…]},"success":n,"failure":n}.
            let detail = (try? JSONParser.parse(Array(message.utf8)))?["illegalTokens"]
            var reasons: [String] = []
            if case .object(let byReason)? = detail {
                for (reason, tokens) in byReason where (tokens.arrayValue ?? []).contains(where: { $0.stringValue == token }) {
                    reasons.append(reason.description)
                }
            }
            if reasons.contains(where: { harmonyDeadTokenReasons.contains($0) }) { return .revokeDeadToken(reason: summary) }
            if code == "80100000" && reasons.isEmpty { return .delivered(reference: json?["requestId"]?.stringValue, status: answer.status) }
            if reasons.contains("appinfoError") {
                // "If the application was created successfully, try again later."
                return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
            }
            if !reasons.isEmpty {
                // Refused for the application's rights, country, penalty …: every token of it would be.
                return .pause(reason: summary)
            }
            // 80300007 naming no reason we can read: the one token sent is the invalid one.
            return .revokeDeadToken(reason: summary)
        case .authenticationError, .jwtExpired:
            return .refreshCredentials(reason: summary)
        case .notAllowed, .penalised, .jwtTooLong:
            return .pause(reason: summary)
        case .testMessagesExceeded:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: true)
        case .internalError:
            return .retry(reason: summary, retryAfter: retryAfter, slowDown: false)
        case .parameterError, .payloadError, .expiryPast, .bodyTooLarge, .tooManyTokens:
            // The request is ours: a defect, not the device's.
            return .failed(reason: summary)
        case .unknown:
            if (200..<300).contains(answer.status) { return .retry(reason: summary, retryAfter: retryAfter, slowDown: false) }
            return byHTTPStatus(answer.status, summary: summary, retryAfter: retryAfter)
        case nil:
            if (200..<300).contains(answer.status) {
                return .retry(reason: summary + " (no result code)", retryAfter: retryAfter, slowDown: false)
            }
            return byHTTPStatus(answer.status, summary: summary, retryAfter: retryAfter)
        }
    }
}
