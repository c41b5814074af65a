import PushCore
import PushJSON
@testable import PushDelivery
import PushHTTP
import PushFakes
import PushTestSupport
import Testing

/// Every row of SPEC §8's table, from the recorded answers of `fixtures/providers/`.
@Suite("Provider answers")
struct ClassifierTests {
    static let now: Int64 = 1_700_000_000_000

    func answer(_ name: String) -> ProviderAnswer {
        let recorded = ProviderFixtures.answer(name)
        return ProviderAnswer(status: recorded.status, retryAfter: recorded.retryAfter, body: recorded.body)
    }

    enum Class: String, CaseIterable { case delivered, retry, slowDown, refresh, revokeDead, revoke, pause, failed }

    static func classOf(_ outcome: DeliveryOutcome) -> Class {
        switch outcome {
        case .delivered: .delivered
        case .retry(_, _, let slowDown): slowDown ? .slowDown : .retry
        case .refreshCredentials: .refresh
        case .revokeDeadToken: .revokeDead
        case .revoke: .revoke
        case .pause: .pause
        case .failed: .failed
        }
    }

    @Test(
        "FCM recorded answers",
        arguments: [
            ("fcm-success", Class.delivered), ("fcm-unregistered", .revokeDead), ("fcm-invalid-token", .revokeDead),
            ("fcm-invalid-data-value", .failed), ("fcm-too-large", .failed), ("fcm-quota-exceeded", .slowDown),
            ("fcm-unavailable", .retry), ("fcm-internal", .retry), ("fcm-unauthenticated", .refresh),
            ("fcm-third-party-auth", .pause), ("fcm-sender-id-mismatch", .revokeDead), ("fcm-permission-denied", .pause),
            // Not a refusal of the payload's shape: revoked with a revoke notification (SPEC §8), not dropped as a defect.
            ("fcm-failed-precondition", .revoke),
        ])
    func fcm(name: String, expected: Class) {
        let outcome = AnswerClassifier.fcm(answer(name), now: Self.now)
        #expect(Self.classOf(outcome) == expected, "\(name): \(outcome)")
    }

    @Test("FCM: the success names the message; the quota answer carries Retry-After")
    func fcmDetails() {
        #expect(AnswerClassifier.fcm(answer("fcm-success"), now: Self.now) == .delivered(reference: "projects/my-proj/messages/0:1500415314455276%31bd1c9631bd1c96", status: 200))
        guard case .retry(_, let retryAfter, true) = AnswerClassifier.fcm(answer("fcm-quota-exceeded"), now: Self.now) else {
            Issue.record("not a slow-down")
            return
        }
        #expect(retryAfter == Self.now + 60_000)
    }

    @Test(
        "FCM by HTTP status when the body says nothing known",
        arguments: [
            (429, Class.slowDown), (500, .retry), (502, .retry), (503, .retry), (504, .retry), (408, .retry), (401, .refresh),
            (403, .pause), (404, .pause), (400, .revoke), (410, .revoke), (413, .revoke), (302, .pause), (200, .delivered),
        ])
    func fcmStatus(status: Int, expected: Class) {
        for body in ["<html>Error 502 (Server Error)!!1</html>", "", "{\"error\":{\"status\":\"SOMETHING_NEW\"}}"] {
            let outcome = AnswerClassifier.fcm(ProviderAnswer(status: status, body: Array(body.utf8)), now: Self.now)
            #expect(Self.classOf(outcome) == expected, "\(status) \(body): \(outcome)")
        }
    }

    @Test(
        "HMS recorded answers",
        arguments: [
            ("hms-success", Class.delivered), ("hms-token-expired", .refresh), ("hms-all-tokens-invalid", .revokeDead),
            ("hms-internal", .retry), ("hms-not-allowed", .pause),
        ])
    func hms(name: String, expected: Class) {
        let outcome = AnswerClassifier.hms(answer(name), token: "t1", now: Self.now)
        #expect(Self.classOf(outcome) == expected, "\(name): \(outcome)")
    }

    @Test("HMS 80100000: only the illegal tokens are revoked")
    func hmsPartial() {
        #expect(Self.classOf(AnswerClassifier.hms(answer("hms-partial"), token: "illegal-token", now: Self.now)) == .revokeDead)
        #expect(Self.classOf(AnswerClassifier.hms(answer("hms-partial"), token: "good-token", now: Self.now)) == .delivered)
    }

    @Test(
        "HMS codes and statuses",
        arguments: [
            (200, "80200001", Class.refresh), (200, "80100017", .retry), (200, "80300008", .failed), (200, "80100003", .failed),
            (200, "80100016", .revoke), (200, "80600003", .revoke), (400, "80100001", .failed), (503, "", .slowDown), (502, "", .retry),
            (500, "", .retry), (401, "", .refresh), (404, "", .pause), (200, "", .retry),
        ])
    func hmsCodes(status: Int, code: String, expected: Class) {
        let body = code.isEmpty ? "not json" : "{\"code\":\"\(code)\",\"msg\":\"m\"}"
        let outcome = AnswerClassifier.hms(ProviderAnswer(status: status, body: Array(body.utf8)), token: "t", now: Self.now)
        #expect(Self.classOf(outcome) == expected, "\(status) \(code): \(outcome)")
        // The code may come as a number as well.
        if let number = Int(code) {
            let numeric = AnswerClassifier.hms(ProviderAnswer(status: status, body: Array("{\"code\":\(number)}".utf8)), token: "t", now: Self.now)
            #expect(Self.classOf(numeric) == expected)
        }
    }

    @Test(
        "webhook statuses",
        arguments: [
            (200, Class.delivered), (204, .delivered), (408, .retry), (429, .slowDown), (500, .retry), (503, .retry),
            // Only 410 revokes (Standard Webhooks); the receiver's configuration faults pause
            // that destination; a 404 (a deploy) is retried within the window.
            (410, .revokeDead), (400, .retry), (404, .retry), (422, .retry), (301, .pause), (302, .pause), (307, .pause),
            (401, .pause), (403, .pause), (413, .failed),
        ])
    func webhook(status: Int, expected: Class) {
        #expect(Self.classOf(AnswerClassifier.webhook(ProviderAnswer(status: status, body: []), now: Self.now)) == expected)
    }

    @Test(
        "APNs answers: every reason of reference/apns-webpush.md §1.4",
        arguments: [
            (200, nil, Class.delivered),
            (410, "Unregistered", .revokeDead), (410, "ExpiredToken", .revokeDead),
            (400, "BadDeviceToken", .revokeDead), (400, "DeviceTokenNotForTopic", .revokeDead),
            (400, "TopicDisallowed", .pause), (400, "IdleTimeout", .retry),
            (400, "BadCollapseId", .failed), (400, "BadExpirationDate", .failed), (400, "BadMessageId", .failed), (400, "BadPriority", .failed),
            (400, "BadTopic", .failed), (400, "DuplicateHeaders", .failed), (400, "InvalidPushType", .failed),
            (400, "MissingDeviceToken", .failed), (400, "MissingTopic", .failed), (400, "PayloadEmpty", .failed),
            (403, "ExpiredProviderToken", .refresh), (403, "UnrelatedKeyIdInToken", .retry),
            (403, "InvalidProviderToken", .pause), (403, "MissingProviderToken", .pause), (403, "Forbidden", .pause),
            (403, "BadCertificate", .pause), (403, "BadCertificateEnvironment", .pause), (403, "BadEnvironmentKeyIdInToken", .pause),
            (404, "BadPath", .pause), (405, "MethodNotAllowed", .pause),
            (413, "PayloadTooLarge", .failed),
            (429, "TooManyRequests", .retry), (429, "TooManyProviderTokenUpdates", .slowDown),
            (500, "InternalServerError", .retry), (503, "ServiceUnavailable", .retry), (503, "Shutdown", .retry),
            (400, nil, .failed), (302, nil, .pause),
        ] as [(Int, String?, Class)])
    func apns(status: Int, reason: String?, expected: Class) {
        let body = reason.map { #"{"reason":"\#($0)"\#($0 == "Unregistered" ? #","timestamp":1700000000000"# : "")}"# } ?? ""
        let outcome = AnswerClassifier.apns(ProviderAnswer(status: status, body: Array(body.utf8)), now: Self.now)
        #expect(Self.classOf(outcome) == expected, "\(status) \(reason ?? "-"): \(outcome)")
        if let reason { #expect(outcome.reason.contains(reason) || expected == .delivered) }
    }

    @Test(
        "Web Push answers",
        arguments: [
            (201, Class.delivered), (200, .delivered), (404, .revokeDead), (410, .revokeDead), (413, .failed), (400, .failed),
            (401, .pause), (403, .pause), (429, .slowDown), (500, .retry), (503, .retry), (302, .retry),
        ])
    func webPush(status: Int, expected: Class) {
        #expect(Self.classOf(AnswerClassifier.webPush(ProviderAnswer(status: status, body: []), now: Self.now)) == expected)
    }

    @Test("APNs and Web Push: Retry-After of a 429 is honoured")
    func retryAfterNewKinds() {
        let answer = ProviderAnswer(status: 429, retryAfter: "30", body: Array(#"{"reason":"TooManyRequests"}"#.utf8))
        #expect(AnswerClassifier.apns(answer, now: Self.now) == .retry(reason: "HTTP 429 TooManyRequests", retryAfter: Self.now + 30_000, slowDown: false))
        #expect(AnswerClassifier.webPush(answer, now: Self.now) == .retry(reason: "HTTP 429", retryAfter: Self.now + 30_000, slowDown: true))
    }

    @Test("OAuth answers: tokens, credentials refused, endpoint unavailable")
    func oauth() throws {
        let google = try AnswerClassifier.oauth(answer("google-token"), now: Self.now).get()
        #expect(google == .init(token: "ya29.c.fake-access-token", expiresIn: 3599))
        let hms = try AnswerClassifier.oauth(answer("hms-token"), now: Self.now).get()
        #expect(hms.expiresIn == 3600)
        let stringExpiry = try AnswerClassifier.oauth(ProviderAnswer(status: 200, body: Array(#"{"access_token":"x","expires_in":"120"}"#.utf8)), now: 0).get()
        #expect(stringExpiry.expiresIn == 120)
        for name in ["google-invalid-grant", "hms-token-invalid-client"] {
            guard case .failure(.credentials) = AnswerClassifier.oauth(answer(name), now: Self.now) else {
                Issue.record("\(name) is not a credentials failure")
                continue
            }
        }
        // A token goes into every request's `authorization` field: one a field cannot carry
        // (a space, a CR or LF, a control character, non-ASCII) is no token.
        for body in [#"{"access_token":"ya29 x"}"#, #"{"access_token":"ya29\r\nx"}"#, #"{"access_token":"a\u0000"}"#, #"{"access_token":"é"}"#] {
            guard case .failure(.retry(let reason, _)) = AnswerClassifier.oauth(ProviderAnswer(status: 200, body: Array(body.utf8)), now: 0) else {
                Issue.record("\(body) is taken as a token")
                continue
            }
            #expect(reason == "the token endpoint answered 200 with an access_token a header cannot carry")
        }
        for (status, body) in [(503, ""), (500, "{}"), (400, #"{"error":"temporarily_unavailable"}"#), (200, "{}")] {
            guard case .failure(.retry) = AnswerClassifier.oauth(ProviderAnswer(status: status, body: Array(body.utf8)), now: 0) else {
                Issue.record("\(status) \(body) is not retried")
                continue
            }
        }
    }

    @Test("provider messages in reasons are bounded and free of control characters")
    func boundedReasons() {
        let long = String(repeating: "x\n", count: 10_000)
        let body = "{\"error\":{\"code\":400,\"message\":\"\(long.replacingOccurrences(of: "\n", with: "\\n"))\",\"status\":\"INVALID_ARGUMENT\"}}"
        let outcome = AnswerClassifier.fcm(ProviderAnswer(status: 400, body: Array(body.utf8)), now: 0)
        #expect(outcome.reason.count < 300)
        #expect(!outcome.reason.contains("\n"))
    }
}

@Suite("Retry timing")
struct RetryTimingTests {
    @Test("1 s, 2 s, 4 s … within ±20 %, never before Retry-After, only within the window")
    func schedule() {
        let policy = RetryPolicy()
        #expect((1...5).map { policy.nominalDelay(afterAttempts: $0) } == [1_000, 2_000, 4_000, 8_000, 16_000])
        #expect(policy.delay(afterAttempts: 1, random: 0) == 800)
        #expect(policy.delay(afterAttempts: 1, random: 0.999_999) == 1_199)
        #expect(policy.delay(afterAttempts: 2, random: 0) == 1_600)
        #expect(policy.delay(afterAttempts: 2, random: 0.5) == 2_000)
        // Retry-After later than the back-off wins; earlier does not shorten it.
        #expect(policy.nextAttempt(now: 10_000, firstAttempt: 10_000, attempts: 1, retryAfter: 70_000, random: 0.5) == 70_000)
        #expect(policy.nextAttempt(now: 10_000, firstAttempt: 10_000, attempts: 1, retryAfter: 10_500, random: 0.5) == 11_000)
        // The window: 2 h from the first attempt.
        #expect(policy.nextAttempt(now: 7_199_000, firstAttempt: 0, attempts: 3, retryAfter: nil, random: 0) == nil)
        #expect(policy.nextAttempt(now: 7_000_000, firstAttempt: 0, attempts: 3, retryAfter: nil, random: 0.5) == 7_004_000)
        #expect(policy.nextAttempt(now: 0, firstAttempt: 0, attempts: 1, retryAfter: 7_200_001, random: 0.5) == nil)
    }

    @Test("huge attempt counts and configured numbers saturate instead of trapping")
    func saturation() {
        let policy = RetryPolicy(initial: .max, multiplier: .infinity, jitter: .nan, window: .max)
        #expect(policy.delay(afterAttempts: .max, random: 1) == .max)
        #expect(policy.nextAttempt(now: .max, firstAttempt: .max, attempts: .max, retryAfter: .max, random: .nan) == .max)
        #expect(RetryPolicy().delay(afterAttempts: 10_000, random: 0.5) == .max)
    }

    @Test("Retry-After: seconds and the three HTTP date forms; garbage is ignored")
    func retryAfter() {
        let now: Int64 = 784_111_000_000  // 1994-11-06 08:36:40 GMT
        #expect(RetryAfter.parse("120", now: now) == now + 120_000)
        #expect(RetryAfter.parse(" 0 ", now: now) == now)
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == 784_111_777_000)
        #expect(RetryAfter.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == 784_111_777_000)
        #expect(RetryAfter.parse("Sun Nov  6 08:49:37 1994", now: now) == 784_111_777_000)
        #expect(RetryAfter.parse("99999999999999999999999", now: now) == .max)
        for garbage in [nil, "", "-5", "1.5", "soon", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT",
                        String(repeating: "1", count: 100)] {
            #expect(RetryAfter.parse(garbage, now: now) == nil, "\(garbage ?? "nil")")
        }
        #expect(RetryAfter.format(seconds: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(RetryAfter.parse(RetryAfter.format(seconds: 1_800_000_000), now: 0) == 1_800_000_000_000)
    }

    @Test("Retry-After parsing survives mutated input", arguments: [1, 2, 3])
    func retryAfterMutations(seed: UInt64) {
        var mutator = Mutator(seed: seed)
        for _ in 0..<2_000 {
            let text = String(decoding: mutator.mutateBytes(Array("Sun, 06 Nov 1994 08:49:37 GMT".utf8)), as: UTF8.self)
            if let value = RetryAfter.parse(text, now: 0) { #expect(value >= 0) }
        }
    }
}

@Suite("Provider messages")
struct ProviderMessageTests {
    @Test("FCM: token, the data map as stored, Android high, the APNs background settings")
    func fcm() throws {
        let body = ProviderMessages.fcm(token: "tok\"en", data: Array(#"{"s":"OK","d":"{\"a\":1}"}"#.utf8))
        #expect(
            String(decoding: body, as: UTF8.self)
                == #"{"message":{"token":"tok\"en","data":{"s":"OK","d":"{\"a\":1}"},"android":{"priority":"HIGH"},"apns":{"headers":{"apns-push-type":"background","apns-priority":"5"},"payload":{"aps":{"content-available":1}}}}}"#
        )
        _ = try JSONParser.parse(body)
    }

    @Test("HMS: data as a JSON string, the token in an array, urgency high")
    func hms() throws {
        let body = ProviderMessages.hms(token: "t1", data: Array(#"{"s":"OK","p":"/a"}"#.utf8))
        #expect(
            String(decoding: body, as: UTF8.self)
                == #"{"validate_only":false,"message":{"data":"{\"s\":\"OK\",\"p\":\"/a\"}","android":{"urgency":"HIGH"},"token":["t1"]}}"#)
        let parsed = try JSONParser.parse(body)
        #expect(parsed["message"]?["data"]?.stringValue == #"{"s":"OK","p":"/a"}"#)
    }

    @Test("webhook: the id first, then the stored body")
    func webhook() {
        let body = ProviderMessages.webhook(id: "msg_7", storedBody: Array(#"{"app":"a","event":{}}"#.utf8))
        #expect(String(decoding: body, as: UTF8.self) == #"{"id":"msg_7","app":"a","event":{}}"#)
        #expect(String(decoding: ProviderMessages.webhook(id: "x", storedBody: Array("{}".utf8)), as: UTF8.self) == #"{"id":"x"}"#)
    }

    @Test("Standard Webhooks signature: the specification's example")
    func signature() throws {
        // From the Standard Webhooks specification's test vectors.
        let secret = try WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let signature = secret.signature(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: Array(#"{"test": 2432232314}"#.utf8))
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        #expect(throws: WebhookSecretError.self) { try WebhookSecret("whsec_not base64!") }
        #expect(throws: WebhookSecretError.self) { try WebhookSecret("whsec_c2hvcnQ=") }
    }
}

@Suite("Provider answers: bad input")
struct ClassifierBadInputTests {
    static let names = [
        "fcm-success", "fcm-unregistered", "fcm-invalid-token", "fcm-invalid-data-value", "fcm-quota-exceeded", "fcm-unauthenticated",
        "fcm-third-party-auth", "google-token", "google-invalid-grant", "hms-token", "hms-token-invalid-client", "hms-success",
        "hms-partial", "hms-token-expired", "hms-all-tokens-invalid",
    ]

    @Test("mutated provider bodies and headers never crash a classifier, and reasons stay bounded", arguments: [1, 2, 3] as [UInt64])
    func mutatedAnswers(seed: UInt64) {
        var mutator = Mutator(seed: seed)
        for _ in 0..<120 {
            for name in Self.names {
                let recorded = ProviderFixtures.answer(name)
                // Byte damage, or structural damage (wrong types, limits, deep nesting).
                var body = mutator.mutateBytes(recorded.body)
                if mutator.random.chance(50), let parsed = try? JSONParser.parse(recorded.body) {
                    var writer = JSONWriter()
                    writer.write(mutator.mutateJSON(parsed))
                    body = writer.bytes
                }
                let status = mutator.random.pick([recorded.status, 200, 400, 401, 429, 503, -1, 99_999])
                let retryAfter = String(decoding: mutator.mutateBytes(Array((recorded.retryAfter ?? "60").utf8)), as: UTF8.self)
                let answer = ProviderAnswer(status: status, retryAfter: retryAfter, body: body)
                for outcome in [
                    AnswerClassifier.fcm(answer, now: .max), AnswerClassifier.hms(answer, token: "illegal-token", now: .min),
                    AnswerClassifier.webhook(answer, now: 0),
                ] {
                    #expect(outcome.reason.unicodeScalars.count <= 300)
                }
                if case .success(let token) = AnswerClassifier.oauth(answer, now: .max) {
                    #expect(!token.token.isEmpty && (0...86_400).contains(token.expiresIn))
                    #expect(token.token.utf8.allSatisfy { (0x21...0x7E).contains($0) })
                }
            }
        }
    }
}

@Suite("A provider's reason, bounded")
struct ProviderReasonBoundTests {
    @Test("a provider's code and message are cut in bytes, not characters: four-byte characters cannot make a reason longer (issue 33)")
    func bytes() {
        let reason = AnswerClassifier.describe(http: 400, code: String(repeating: "𝄞", count: 100), message: String(repeating: "😀", count: 500))
        #expect(reason.utf8.count <= 64 + 200 + 40, "\(reason.utf8.count) bytes")
        #expect(AnswerClassifier.describe(http: 404, code: "UNREGISTERED", message: "Requested entity was not found.") == "HTTP 404 UNREGISTERED: Requested entity was not found.")
    }
}
