import PushCore
import PushHTTP

/// Sends with a bearer token from `tokens`; when the provider refuses the token, refreshes it
/// (one refresh shared by all concurrent sends) and resends once. A second refusal is a
/// credentials fault: the application is paused.
func sendWithToken(
    provider: Provider, tokens: AccessTokenCache, context: SenderContext, request: (String) -> OutgoingRequest,
    classify: (ProviderAnswer, Int64) -> DeliveryOutcome, firstAttempt: Int = 0
) async -> DeliveryOutcome {
    for attempt in firstAttempt..<2 {
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
            return .unanswered(error)
        }
        let outcome = classify(answer, context.clock.now)
        guard case .refreshCredentials(let reason) = outcome else { return outcome }
        await tokens.invalidate(generation: token.generation)
        if attempt == 1 { return .pause(reason: "the provider refused a fresh access token: \(reason)") }
    }
    return .pause(reason: "unreachable")
}

/// ``sendWithToken(provider:tokens:context:request:classify:firstAttempt:)`` without a task
/// when the token is at hand and the transport takes callbacks: false when nothing was
/// started. A refused token goes on in a task (the refresh, the second attempt), as
/// ``sendWithToken(provider:tokens:context:request:classify:firstAttempt:)`` does it.
func startWithToken(
    provider: Provider, tokens: AccessTokenCache, context: SenderContext, request: @escaping @Sendable (String) -> OutgoingRequest,
    classify: @escaping @Sendable (ProviderAnswer, Int64) -> DeliveryOutcome, completion: @escaping @Sendable (DeliveryOutcome) -> Void
) -> Bool {
    guard let token = tokens.cachedToken() else { return false }
    return context.start(request(token.value), provider: provider) { result in
        let answer: ProviderAnswer
        switch result {
        case .failure(let error):
            completion(.unanswered(error))
            return
        case .success(let received):
            answer = received
        }
        let outcome = classify(answer, context.clock.now)
        guard case .refreshCredentials = outcome else {
            completion(outcome)
            return
        }
        Task {
            await tokens.invalidate(generation: token.generation)
            completion(
                await sendWithToken(provider: provider, tokens: tokens, context: context, request: request, classify: classify, firstAttempt: 1))
        }
    }
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
    return try AnswerClassifier.oauth(answer, now: context.clock.now).get()
}

extension String {
    func trimmingTrailingSlashes() -> String {
        var text = Substring(self)
        while text.hasSuffix("/") { text = text.dropLast() }
        return String(text)
    }
}
