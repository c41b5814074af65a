import PushCore
import PushJSON
import Testing

/// The kind each refusal carries, beside its message (the message's text is tested where each
/// parser is).
@Suite("Request errors: kinds")
struct RequestErrorTests {
    static func kind(_ body: () throws(RequestError) -> Void) -> RequestError.Kind? {
        do throws(RequestError) {
            try body()
            return nil
        } catch {
            return error.kind
        }
    }

    static let keys = #""keys":{"p256dh":"BOr","auth":"x"}"#

    /// Each case: what is refused, and the kind expected.
    static let cases: [(String, RequestError.Kind)] = [
        ("an empty application id", .invalid), ("a 200-byte application id", .tooLarge),
        ("an APNs token with a non-hexadecimal character", .invalid), ("a webpush context that is not JSON", .invalid),
        ("a webpush context without keys", .missing), ("a webpush context without endpoint", .missing), ("a 5,000-byte endpoint", .tooLarge),
    ]

    static func refuse(_ what: String) throws(RequestError) {
        switch what {
        case "an empty application id": try AppID.validate("", field: "app")
        case "a 200-byte application id": try AppID.validate(String(repeating: "a", count: 200), field: "app")
        case "an APNs token with a non-hexadecimal character": _ = try APNsDeviceToken.canonical("zz")
        case "a webpush context that is not JSON": _ = try WebPushContext(context: "{")
        case "a webpush context without keys": _ = try WebPushContext(context: #"{"endpoint":"https://p.example/1"}"#)
        case "a webpush context without endpoint": _ = try WebPushContext(context: "{\(keys)}")
        case "a 5,000-byte endpoint":
            _ = try WebPushContext(context: #"{"endpoint":"https://p.example/\#(String(repeating: "a", count: 5_000))",\#(keys)}"#)
        default: Issue.record("no such case: \(what)")
        }
    }

    @Test("application ids, APNs tokens and browser subscriptions refuse with the kind of their fault", arguments: cases)
    func kinds(what: String, expected: RequestError.Kind) {
        #expect(Self.kind { () throws(RequestError) in try Self.refuse(what) } == expected, "\(what)")
    }

    @Test("the kinds' names are stable, and equal errors are equal in kind and message")
    func names() {
        #expect([RequestError.Kind.missing, .invalid, .tooLarge, .unsupported, .notConfigured, .undecodable].map(\.description)
            == ["missing", "invalid", "too_large", "unsupported", "not_configured", "undecodable"])
        #expect(RequestError(.missing, "a: missing") == RequestError(.missing, "a: missing"))
        #expect(RequestError(.missing, "a: missing") != RequestError(.invalid, "a: missing"))
    }
}
