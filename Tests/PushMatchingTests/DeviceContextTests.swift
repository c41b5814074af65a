@testable import PushCore
import PushJSON
@testable import PushMatching
import PushTestSupport
import Testing

/// The contexts of the kinds `apns` and `webpush` (issue 24): what a subscription accepts,
/// its canonical form, and the payload bound of each kind.
@Suite("Device contexts: APNs tokens and browser subscriptions")
struct DeviceContextTests {
    static let token = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"
    static let p256dh = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let auth = "BTBZMqHH6r4Tts7J_aSIgg"
    static let canonical = #"{"endpoint":"https://push.example.net/s/1","keys":{"auth":"BTBZMqHH6r4Tts7J_aSIgg","p256dh":"BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"}}"#

    struct TokenCase: CustomTestStringConvertible, Sendable {
        var text: String
        /// The canonical token, or a fragment of the refusal.
        var expected: Result<String, Refusal>
        struct Refusal: Error, Equatable { var fragment: String }
        var testDescription: String { String(text.prefix(24)) }
    }

    static let tokens: [TokenCase] = [
        TokenCase(text: token, expected: .success(token)),
        TokenCase(text: token.uppercased(), expected: .success(token)),
        TokenCase(text: String(repeating: "ab", count: 8), expected: .success(String(repeating: "ab", count: 8))),
        TokenCase(text: String(repeating: "ab", count: 100), expected: .success(String(repeating: "ab", count: 100))),
        TokenCase(text: String(repeating: "ab", count: 101), expected: .failure(.init(fragment: "202 digits"))),
        TokenCase(text: String(repeating: "ab", count: 7), expected: .failure(.init(fragment: "14 digits"))),
        TokenCase(text: token + "a", expected: .failure(.init(fragment: "even number"))),
        TokenCase(text: "fcm-token:APA91b", expected: .failure(.init(fragment: "hexadecimal"))),
        TokenCase(text: "0x" + token, expected: .failure(.init(fragment: "hexadecimal"))),
        TokenCase(text: "", expected: .failure(.init(fragment: "0 digits"))),
        TokenCase(text: token.replacingOccurrences(of: "7", with: " "), expected: .failure(.init(fragment: "hexadecimal"))),
    ]

    @Test("APNs device tokens: 16 to 200 hexadecimal digits, an even number (8 to 100 bytes), kept in lower case", arguments: tokens)
    func apnsTokens(row: TokenCase) {
        switch (Result { () throws(RequestError) in try APNsDeviceToken.canonical(row.text) }, row.expected) {
        case (.success(let got), .success(let want)):
            #expect(got == want)
        case (.failure(let error), .failure(let refusal)):
            #expect(error.message.contains(refusal.fragment), "\(error.message)")
        case (let got, let want):
            Issue.record("got \(got), expected \(want)")
        }
    }

    struct ContextCase: CustomTestStringConvertible, Sendable {
        var name: String
        var context: JSON
        /// The canonical text, or a fragment of the refusal.
        var expected: Result<String, TokenCase.Refusal>
        var testDescription: String { name }
    }

    static let contexts: [ContextCase] = [
        ContextCase(
            name: "toJSON() as an object, expirationTime dropped",
            context: ["endpoint": "https://push.example.net/s/1", "expirationTime": .null, "keys": ["p256dh": .string(p256dh), "auth": .string(auth)]],
            expected: .success(canonical)),
        ContextCase(
            name: "as JSON text, members in another order",
            context: .string(#"{"keys":{"p256dh":"\#(p256dh)","auth":"\#(auth)"},"endpoint":"https://push.example.net/s/1"}"#),
            expected: .success(canonical)),
        ContextCase(name: "the canonical text itself", context: .string(canonical), expected: .success(canonical)),
        ContextCase(name: "text that is not JSON", context: "https://push.example.net/s/1", expected: .failure(.init(fragment: "not JSON"))),
        ContextCase(name: "no keys", context: ["endpoint": "https://push.example.net/s/1"], expected: .failure(.init(fragment: "context.keys: missing"))),
        ContextCase(
            name: "no endpoint", context: ["keys": ["p256dh": .string(p256dh), "auth": .string(auth)]],
            expected: .failure(.init(fragment: "context.endpoint: missing"))),
        ContextCase(
            name: "an unknown member", context: ["endpoint": "https://a.example/1", "options": .null, "keys": ["p256dh": .string(p256dh), "auth": .string(auth)]],
            expected: .failure(.init(fragment: "unknown field \"options\""))),
        ContextCase(
            name: "a key that is not text", context: ["endpoint": "https://a.example/1", "keys": ["p256dh": 1, "auth": .string(auth)]],
            expected: .failure(.init(fragment: "context.keys.p256dh: expected a string"))),
        ContextCase(
            name: "an endpoint of 3000 bytes",
            context: ["endpoint": .string("https://a.example/" + String(repeating: "x", count: 3000)), "keys": ["p256dh": .string(p256dh), "auth": .string(auth)]],
            expected: .failure(.init(fragment: "at most 2048"))),
        ContextCase(name: "an array", context: [1, 2], expected: .failure(.init(fragment: "expected a JSON object"))),
    ]

    @Test("browser subscriptions: read as an object or its text, kept canonical", arguments: contexts)
    func webPushContexts(row: ContextCase) {
        switch (Result { () throws(RequestError) in try WebPushContext(row.context).canonicalText }, row.expected) {
        case (.success(let got), .success(let want)):
            #expect(got == want)
            #expect((try? WebPushContext(context: got).canonicalText) == got)
        case (.failure(let error), .failure(let refusal)):
            #expect(error.message.contains(refusal.fragment), "\(error.message)")
        case (let got, let want):
            Issue.record("got \(got), expected \(want)")
        }
    }

    @Test("a subscription request of each kind: context required and canonical; one browser subscription is one tuple")
    func requests() throws {
        let apns = try SubscriptionRequest.decode(
            try JSONParser.parse(#"{"kind":"apns","path":"/a","context":"\#(Self.token.uppercased())"}"#), app: "toto", uid: "u1")
        #expect(apns.kind == .apns && apns.context == Self.token)
        let asObject = try SubscriptionRequest.decode(
            try JSONParser.parse(#"{"kind":"webpush","path":"/a","context":{"endpoint":"https://push.example.net/s/1","expirationTime":null,"keys":{"p256dh":"\#(Self.p256dh)","auth":"\#(Self.auth)"}}}"#),
            app: "toto", uid: "u1")
        let asText = try SubscriptionRequest.decode((["kind": "webpush", "path": "/a", "context": JSON.string(Self.canonical)] as JSON), app: "toto", uid: "u1")
        #expect(asObject.context == Self.canonical && asObject.tuple(app: "toto", uid: "u1") == asText.tuple(app: "toto", uid: "u1"))
        for (body, fragment) in [
            (#"{"kind":"apns","path":"/a"}"#, "the device's APNs token in hexadecimal"),
            (#"{"kind":"webpush","path":"/a"}"#, "PushSubscription"),
            (#"{"kind":"apns","path":"/a","context":"xyz"}"#, "hexadecimal"),
            (#"{"kind":"apns","path":"/a","context":"\#(Self.token)","destination":"orders"}"#, "only webhook"),
            (#"{"kind":"pigeon","path":"/a","context":"x"}"#, "apns"),
        ] {
            #expect {
                _ = try SubscriptionRequest.decode(try JSONParser.parse(body), app: "toto", uid: "u1")
            } throws: { error in
                (error as? RequestError)?.message.contains(fragment) ?? false
            }
        }
    }

    @Test("the application's context check is called with the canonical context, not for webhooks")
    func rulesCallContextCheck() throws {
        var rules = SubscriptionRules(webhooks: ["orders"], lifetimes: .standard, checkEncryption: { _ in })
        rules.checkContext = { kind, context throws(RequestError) in
            if kind == .webpush, context.contains("evil") { throw RequestError(.invalid, "context.endpoint: refused") }
            if kind == .webhook { throw RequestError(.invalid, "not for webhooks") }
        }
        let good = try SubscriptionRequest.decode((["kind": "webpush", "path": "/a", "context": JSON.string(Self.canonical)] as JSON), app: "toto", uid: "u1")
        try rules.check(good)
        try rules.check(try SubscriptionRequest.decode((["kind": "webhook", "path": "/a", "destination": "orders", "context": "x"] as JSON), app: "toto", uid: "u1"))
        let evil = try SubscriptionRequest.decode(
            (["kind": "webpush", "path": "/a", "context": JSON.string(Self.canonical.replacingOccurrences(of: "push.example.net", with: "evil.example"))] as JSON),
            app: "toto", uid: "u1")
        #expect(throws: RequestError.self) { try rules.check(evil) }
    }

    @Test("browser subscriptions: mutated documents are read or refused with a bounded message", arguments: [1, 2, 3] as [UInt64])
    func mutatedContexts(seed: UInt64) throws {
        var mutator = Mutator(seed: seed)
        let base = try JSONParser.parse(Self.canonical)
        for round in 0..<2_000 {
            let input: JSON = mutator.random.chance(50) ? mutator.mutateJSON(base) : .string(String(decoding: mutator.mutateBytes(Array(Self.canonical.utf8)), as: UTF8.self))
            do {
                let context = try WebPushContext(input)
                #expect(context.endpoint.utf8.count <= WebPushContext.maxEndpointBytes)
                #expect((try? WebPushContext(context: context.canonicalText)) == context, "seed \(seed) round \(round)")
            } catch {
                #expect(!error.message.isEmpty && error.message.utf8.count <= 3_000, "seed \(seed) round \(round)")
            }
        }
    }
}
