import Crypto
import PushCore
import PushHTTP
@testable import PushDelivery
import PushTestSupport
import Synchronization
import Testing

/// The credentials' health the operations overview shows (SPEC §13.3): an OAuth token's
/// fetches (held until when, the last refusal), an APNs provider token's age, a VAPID key's
/// signed headers; nothing secret in any of them.
@Suite("Credential health", .processLevel)
struct CredentialHealthTests {
    typealias History = AccessTokenCache.FetchHistory

    static func history(fetchedAt: Int64? = nil, expiresAt: Int64? = nil, failedAt: Int64? = nil) -> History {
        var history = History()
        history.fetchedAt = fetchedAt
        history.expiresAt = expiresAt
        history.refreshAt = expiresAt.map { $0 - 300_000 }
        history.failedAt = failedAt
        history.failure = failedAt.map { _ in "HTTP 400 invalid_grant" }
        return history
    }

    @Test(
        "an OAuth token's state from its fetches",
        arguments: [
            (history(), 1_000, CredentialHealth.State.unused),
            (history(fetchedAt: 0, expiresAt: 3_600_000), 1_000, .ok),
            (history(fetchedAt: 0, expiresAt: 3_600_000), 3_600_000, .idle),
            (history(failedAt: 500), 1_000, .failing),
            (history(fetchedAt: 0, expiresAt: 3_600_000, failedAt: 2_000), 3_000, .failing),
            (history(fetchedAt: 2_000, expiresAt: 3_602_000, failedAt: 1_000), 3_000, .ok),
        ] as [(History, Int64, CredentialHealth.State)])
    func oauthStates(history: History, now: Int64, expected: CredentialHealth.State) {
        let health = CredentialHealth.oauth(app: "toto", provider: .fcm, identity: "svc@example.iam", fetches: history, now: now)
        #expect(health.state == expected)
        #expect(health.expiresAt == history.expiresAt && health.failure == history.failure)
    }

    @Test("the token cache records its fetches: a refusal, then a token until its expiry, refreshed 5 min before")
    func cacheRecordsFetches() async throws {
        let clock = ManualClock()
        let refuse = Atomic<Bool>(true)
        let cache = AccessTokenCache(clock: clock) { () async throws(AnswerClassifier.OAuthFailure) in
            if refuse.load(ordering: .relaxed) { throw .credentials(reason: "HTTP 400 invalid_grant: Invalid JWT Signature.") }
            return AnswerClassifier.AccessToken(token: "ya29.secret-access-token", expiresIn: 3_599)
        }
        #expect(cache.fetches == History())
        await #expect(throws: AnswerClassifier.OAuthFailure.self) { try await cache.token() }
        let failed = cache.fetches
        #expect(failed.failedAt == clock.now && failed.failure == "refused: HTTP 400 invalid_grant: Invalid JWT Signature." && failed.fetchedAt == nil)
        #expect(CredentialHealth.oauth(app: "a", provider: .fcm, identity: "i", fetches: failed, now: clock.now).state == .failing)

        clock.advance(by: .seconds(10))
        refuse.store(false, ordering: .relaxed)
        _ = try await cache.token()
        let fetched = cache.fetches
        #expect(fetched.fetchedAt == clock.now && fetched.expiresAt == clock.now + 3_599_000 && fetched.refreshAt == clock.now + 3_299_000)
        let health = CredentialHealth.oauth(app: "a", provider: .fcm, identity: "i", fetches: fetched, now: clock.now)
        #expect(health.state == .ok && health.failure != nil, "the last refusal is still shown, the token is held")
        #expect(!"\(health)".contains("ya29"), "the token never appears")
    }

    @Test("an APNs provider token: unused, then its age and renewal; a VAPID key: the push services signed for")
    func apnsAndVAPID() throws {
        let key = P256.Signing.PrivateKey()
        let token = try APNsProviderToken(teamID: "TEAM123456", keyID: "KEY1234567", privateKeyPEM: key.pemRepresentation)
        let context = SenderContext(transport: NoTransport(), timeout: .seconds(1), clock: ManualClock())
        let apns = APNsSender(endpoint: "https://apns.invalid", topic: "com.example", token: token, storage: 60, context: context)
        let vapid = VAPIDKey(privateKey: P256.Signing.PrivateKey())
        let webpush = WebPushSender(vapid: vapid, subject: "mailto:ops@example.com", policy: WebPushEndpointPolicy(), ttl: 60, context: context)
        let senders = ApplicationSenders(apns: apns, webpush: webpush)

        let before = senders.credentials(app: "toto", now: 1_800_000_000_000)
        #expect(before.map(\.provider) == [.apns, .webpush])
        #expect(before[0].state == .unused && before[0].identity == "team TEAM123456, key KEY1234567" && before[0].issuedAt == nil)
        #expect(before[1].state == .ok && before[1].origins == 0 && before[1].identity == "public key \(vapid.publicKeyText)")

        _ = try token.current(now: 1_800_000_000)
        _ = try webpush.headers.value(origin: "https://push.example.net", now: 1_800_000_000)
        let after = senders.credentials(app: "toto", now: 1_800_000_600_000)
        #expect(after[0].state == .ok && after[0].issuedAt == 1_800_000_000_000)
        #expect(after[0].renewsAt == 1_800_003_000_000 && after[0].expiresAt == 1_800_003_600_000)
        #expect(after[1].origins == 1 && after[1].expiresAt == 1_800_043_200_000)
        #expect(senders.credentials(app: "toto", now: 1_800_003_600_000)[0].state == .idle, "an hour old: renewed at the next send")
        let shown = "\(after)"
        #expect(!shown.contains(key.pemRepresentation) && !shown.contains(String(describing: key.rawRepresentation)))
    }
}

/// A transport the test never sends through.
private struct NoTransport: HTTPTransport {
    func send(_ request: OutgoingRequest, timeout: Duration) async throws(TransportError) -> ProviderAnswer {
        throw TransportError(.other, "no transport in this test")
    }

    func shutdown() async throws {}
}
