import PushCore

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
        let outcome = classify(answer, context.clock.now)
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
    return try AnswerClassifier.oauth(answer, now: context.clock.now).get()
}

extension String {
    func trimmingTrailingSlashes() -> String {
        var text = Substring(self)
        while text.hasSuffix("/") { text = text.dropLast() }
        return String(text)
    }
}
