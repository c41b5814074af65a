import PushCore
import PushJOSE

/// Delivers one notification to one provider and says what the answer means. Never throws:
/// every failure is an outcome.
public protocol NotificationSender: Sendable {
    /// The `provider` label of the metrics: `fcm`, `hms`, `webhook`.
    var provider: String { get }
    func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome
}

/// What senders share: the transport, the request deadline, the clock.
public struct SenderContext: Sendable {
    public var transport: any HTTPTransport
    public var timeout: Duration
    /// Milliseconds since the epoch.
    public var now: @Sendable () -> Int64
    /// Where resends of requests lost in transit are counted.
    public var counters: DeliveryCounters?
    /// How many times a request lost in transit (reset, GOAWAY) is resent at once before the
    /// loss counts as a failed attempt with its back-off.
    public static let immediateResends = 2

    public init(transport: any HTTPTransport, timeout: Duration, now: @escaping @Sendable () -> Int64, counters: DeliveryCounters? = nil) {
        self.transport = transport
        self.timeout = timeout
        self.now = now
        self.counters = counters
    }

    /// Sends `request`; a request lost in transit is resent at once, up to
    /// ``immediateResends`` times (a refused stream was never processed; a reset one may have
    /// been: at-least-once, as for any retry).
    func send(_ request: OutgoingRequest, provider: String) async throws(TransportError) -> ProviderAnswer {
        var resends = 0
        while true {
            do {
                return try await transport.send(request, timeout: timeout)
            } catch {
                guard error.lostInTransit, resends < Self.immediateResends, !Task.isCancelled else { throw error }
                resends += 1
                counters?.resent(provider: provider)
            }
        }
    }
}

/// Sends with a bearer token from `tokens`; when the provider refuses the token, refreshes it
/// (one refresh shared by all concurrent sends) and resends once. A second refusal is a
/// credentials fault: the application is paused.
func sendWithToken(
    provider: String, tokens: AccessTokenCache, context: SenderContext, request: (String) -> OutgoingRequest,
    classify: (ProviderAnswer, Int64) -> DeliveryOutcome
) async -> DeliveryOutcome {
    for attempt in 0..<2 {
        let token: AccessTokenCache.Token
        do {
            token = try await tokens.token()
        } catch {
            switch error {
            case .credentials(let reason): return .pause(reason: "access token refused: \(reason)")
            case .retry(let reason, let retryAfter): return .retry(reason: "access token unavailable: \(reason)", retryAfter: retryAfter, slowDown: false)
            }
        }
        let answer: ProviderAnswer
        do {
            answer = try await context.send(request(token.value), provider: provider)
        } catch {
            return .retry(reason: error.description, retryAfter: nil, slowDown: false)
        }
        let outcome = classify(answer, context.now())
        guard case .refreshCredentials(let reason) = outcome else { return outcome }
        await tokens.invalidate(generation: token.generation)
        if attempt == 1 { return .pause(reason: "the provider refused a fresh access token: \(reason)") }
    }
    return .pause(reason: "unreachable")
}

/// `application/x-www-form-urlencoded` with every value percent-encoded (RFC 3986 unreserved
/// characters kept): HMS client secrets may hold `+`, `/`, `&`.
func formEncoded(_ fields: [(String, String)]) -> [UInt8] {
    var out: [UInt8] = []
    for (index, (name, value)) in fields.enumerated() {
        if index > 0 { out.append(UInt8(ascii: "&")) }
        for part in [name, value].enumerated() {
            if part.offset == 1 { out.append(UInt8(ascii: "=")) }
            for byte in part.element.utf8 {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                    out.append(byte)
                default:
                    let hex = Array("0123456789ABCDEF".utf8)
                    out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
                }
            }
        }
    }
    return out
}

func tokenRequest(_ context: SenderContext, url: String, form: [(String, String)]) async throws(AnswerClassifier.OAuthFailure)
    -> AnswerClassifier.AccessToken
{
    let answer: ProviderAnswer
    do {
        answer = try await context.transport.send(
            OutgoingRequest(url: url, headers: [("content-type", "application/x-www-form-urlencoded")], body: formEncoded(form)),
            timeout: context.timeout)
    } catch {
        throw .retry(reason: error.description, retryAfter: nil)
    }
    return try AnswerClassifier.oauth(answer, now: context.now()).get()
}

/// FCM HTTP v1 for one application (SPEC §8).
public struct FCMSender: NotificationSender {
    public let provider = "fcm"
    let url: String
    let context: SenderContext
    public let tokens: AccessTokenCache

    /// - Parameter endpoint: `apps.<id>.fcm.endpoint` (tests: a local fake).
    public init(key: ServiceAccountKey, endpoint: String, context: SenderContext) {
        url = endpoint.trimmingTrailingSlashes() + "/v1/projects/\(key.projectID)/messages:send"
        self.context = context
        tokens = AccessTokenCache(now: context.now) { () async throws(AnswerClassifier.OAuthFailure) in
            let assertion: String
            do {
                assertion = try key.assertion(now: context.now() / 1_000)
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
}

/// HMS Push Kit for one application (SPEC §8).
public struct HMSSender: NotificationSender {
    public let provider = "hms"
    let url: String
    let context: SenderContext
    public let tokens: AccessTokenCache

    public init(clientID: String, clientSecret: String, endpoint: String, tokenEndpoint: String, context: SenderContext) {
        url = endpoint.trimmingTrailingSlashes() + "/v1/\(clientID)/messages:send"
        self.context = context
        tokens = AccessTokenCache(now: context.now) { () async throws(AnswerClassifier.OAuthFailure) in
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
}

/// A webhook (SPEC §8): the §8 body, signed per Standard Webhooks.
public struct WebhookSender: NotificationSender {
    public let provider = "webhook"
    let url: String
    let secret: WebhookSecret
    let context: SenderContext

    public init(url: String, secret: WebhookSecret, context: SenderContext) {
        self.url = url
        self.secret = secret
        self.context = context
    }

    /// The message id: the same for every attempt at the same content (a row keeps its id
    /// while it waits; a newer value merged into it changes its record).
    public static func messageID(_ notification: StoredNotification) -> String {
        "msg_\(notification.id)_\(notification.entry.recordSeq ?? 0)"
    }

    public func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome {
        let id = Self.messageID(notification)
        let body = ProviderMessages.webhook(id: id, storedBody: notification.entry.payload)
        let timestamp = now / 1_000
        let headers = [
            ("content-type", "application/json"), ("webhook-id", id), ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", secret.signature(id: id, timestamp: timestamp, body: body)),
        ]
        do {
            let answer = try await context.send(OutgoingRequest(url: url, headers: headers, body: body), provider: provider)
            return AnswerClassifier.webhook(answer, now: context.now())
        } catch {
            return .retry(reason: error.description, retryAfter: nil, slowDown: false)
        }
    }
}

extension String {
    func trimmingTrailingSlashes() -> String {
        var text = Substring(self)
        while text.hasSuffix("/") { text = text.dropLast() }
        return String(text)
    }
}
