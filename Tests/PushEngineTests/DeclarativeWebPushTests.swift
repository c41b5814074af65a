import PushCore
import PushJSON
import PushMatching
import Testing

@testable import PushEngine

/// Web Push with an application's notification template: a Declarative Web Push message
/// around the data map (issue 34).
@Suite("Declarative Web Push payloads")
struct DeclarativeWebPushTests {
    struct NoSealers: SealerProvider {
        func sealer(for subscription: Subscription) throws -> any EventSealer { throw RequestError(.invalid, "v1 only here") }
    }

    static func subscription(_ kind: SubscriptionKind = .webpush, mode: Mode, path: String = "/feed/news") throws -> Subscription {
        let tuple = SubscriptionTuple(app: "toto", uid: "u1", kind: kind, destination: nil, path: try Path(path), context: "c")
        return Subscription(id: "s", tuple: tuple, mode: mode, format: .v1, encryption: nil, createdAt: 0, expiresAt: 1)
    }

    static let template = try! WebPushNotification(
        title: "{app}: {path} changed", body: "{field}", navigate: "https://example.com/{app}{path}?m={mode}", field: "headline")

    static func build(_ notice: Notice, template: WebPushNotification? = Self.template) throws -> (json: JSON, bytes: [UInt8], status: PayloadStatus?) {
        var builder = NotificationBuilder(sealers: NoSealers(), webPushNotifications: template.map { ["toto": $0] } ?? [:])
        let built = try builder.payload(notice)
        return (try JSONParser.parse(built.bytes), built.bytes, built.status)
    }

    @Test(
        "the template's fields from the event, the data map's members after them, unchanged",
        arguments: [
            (Mode.value, Event.Body.value(.object(JSONObject([("headline", .string("Ça marche")), ("n", .int(1))]))), "Ça marche"),
            (.value, .value(.object(JSONObject([("headline", .int(42))]))), "42"),
            (.value, .value(.object(JSONObject([("other", .bool(true))]))), ""),
            (.value, .value(nil), ""),
            (.noData, .noData, ""),
            (.childEvent, .childEvent(ChildDiff(before: nil, after: .object(JSONObject([("k", .int(1))])))), ""),
        ])
    func fields(mode: Mode, body: Event.Body, expectedBody: String) throws {
        let subscription = try Self.subscription(mode: mode)
        let event = Event(app: "toto", path: "/feed/news", body: body)
        let built = try Self.build(Notice(subscription: subscription, event: event))
        #expect(built.json["web_push"]?.integerValue == 8030)
        let notification = built.json["notification"]
        #expect(notification?["title"]?.stringValue == "toto: /feed/news changed")
        #expect(notification?["body"]?.stringValue == expectedBody)
        #expect(notification?["navigate"]?.stringValue == "https://example.com/toto/feed/news?m=\(mode.rawValue)")
        #expect(notification?["mutable"] == nil)
        // The same data map as without a template, member by member, in order.
        let plain = try Self.build(Notice(subscription: subscription, event: event), template: nil)
        #expect(String(decoding: built.bytes, as: UTF8.self).hasPrefix(#"{"web_push":8030,"notification":{"title":"#))
        #expect(Array(built.bytes.suffix(plain.bytes.count - 1)) == Array(plain.bytes.dropFirst()))
        #expect(built.bytes[built.bytes.count - plain.bytes.count] == UInt8(ascii: ","))
        #expect(built.status == plain.status)
    }

    @Test("§7.4 at the Web Push bound on the whole message: the data map degrades within what the notification leaves")
    func size() throws {
        let subscription = try Self.subscription(mode: .value)
        for length in [100, 3_400, 3_700, 3_900] {
            let event = Event(app: "toto", path: "/feed/news", body: .value(.object(JSONObject([("headline", .string("short")), ("x", .string(String(repeating: "y", count: length)))]))))
            let built = try Self.build(Notice(subscription: subscription, event: event))
            #expect(built.bytes.count < PayloadLimit.webPushBytes, "\(length): \(built.bytes.count)")
            let plain = try Self.build(Notice(subscription: subscription, event: event), template: nil)
            let opening = built.bytes.count - plain.bytes.count
            // OK exactly when the whole would stay under the bound.
            let expected: PayloadStatus = plain.bytes.count + opening < PayloadLimit.webPushBytes ? .ok : .tooBig
            if plain.status == .ok { #expect(built.status == expected, "\(length)") }
            if built.status == .tooBig { #expect(built.json["d"] == nil && built.json["s"]?.stringValue == "TooBig") }
        }
    }

    @Test("long titles and bodies are cut at a character with …; an over-long navigate URL drops the path; paths and fields are percent-encoded in it")
    func bounds() throws {
        let template = try WebPushNotification(title: "{field}", body: "{field}{field}", navigate: "https://example.com/n{path}/{field}", field: "t")
        let long = String(repeating: "é", count: 900)
        let subscription = try Self.subscription(mode: .value, path: "/a b/ü")
        let event = Event(app: "toto", path: "/a b/ü", body: .value(.object(JSONObject([("t", .string(long))]))))
        let built = try Self.build(Notice(subscription: subscription, event: event), template: template)
        let title = built.json["notification"]?["title"]?.stringValue ?? ""
        let body = built.json["notification"]?["body"]?.stringValue ?? ""
        #expect(title.utf8.count <= WebPushNotification.titleBytes && title.hasSuffix("…") && title.dropLast().allSatisfy { $0 == "é" })
        #expect(body.utf8.count <= WebPushNotification.bodyBytes && body.hasSuffix("…"))
        #expect(built.json["notification"]?["navigate"]?.stringValue == "https://example.com/n/")
        let short = Event(app: "toto", path: "/a b/ü", body: .value(.object(JSONObject([("t", .string("x/y"))]))))
        let shortBuilt = try Self.build(Notice(subscription: subscription, event: short), template: template)
        #expect(shortBuilt.json["notification"]?["navigate"]?.stringValue == "https://example.com/n/a%20b/%C3%BC/x%2Fy")
    }

    @Test("revocations and other kinds go without a notification")
    func notEverything() throws {
        let revoke = Event(app: "toto", path: "/feed/news", body: .revoke(.expired))
        #expect(try Self.build(Notice(subscription: try Self.subscription(mode: .value), event: revoke)).json["web_push"] == nil)
        let value = Event(app: "toto", path: "/feed/news", body: .value(.int(1)))
        #expect(try Self.build(Notice(subscription: try Self.subscription(.fcm, mode: .value), event: value)).json["web_push"] == nil)
    }

    @Test(
        "a template that cannot be used says which member and why",
        arguments: [
            ("{app", "x", "https://e.com", nil as String?, "title: a { without its }; write {{ for a brace"),
            ("}", "x", "https://e.com", nil, "title: a } without its {; write }} for a brace"),
            ("{user}", "x", "https://e.com", nil, "title: {user} is not a name; expected {app}, {path}, {mode} or {field}"),
            ("t", "{field}", "https://e.com", nil, "field: missing: a template uses {field}; name the member of the value it stands for"),
            ("t", "b", "http://e.com", nil, "navigate: expected an https:// URL without spaces (the page the notification opens)"),
            ("t", "b", "https://e.com/a b", nil, "navigate: expected an https:// URL without spaces (the page the notification opens)"),
            ("t", "b", "{path}", nil, "navigate: expected an https:// URL without spaces (the page the notification opens)"),
            ("t", "b", "https://e.com", "", "field: empty; name a member of the value, or leave the key out"),
        ])
    func refused(title: String, body: String, navigate: String, field: String?, message: String) {
        #expect(throws: Error.self) { try WebPushNotification(title: title, body: body, navigate: navigate, field: field) }
        do {
            _ = try WebPushNotification(title: title, body: body, navigate: navigate, field: field)
        } catch {
            #expect(error.description == message)
        }
        // Braces doubled are braces.
        #expect((try? WebPushNotification(title: "{{app}}", body: "", navigate: "https://e.com")) != nil)
    }

    @Test("seeded mutations of templates: no crash, and each refusal names a member")
    func mutations() {
        let seeds = ["{app}: {path} changed", "{field} at {mode}", "https://example.com/{app}{path}?m={mode}", "{{x}} {field}"]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        let alphabet = Array("{}/:?%é a\u{0}\u{7F}https".unicodeScalars)
        for _ in 0..<2_000 {
            var chars = Array(seeds[Int(next() % UInt64(seeds.count))].unicodeScalars)
            for _ in 0..<(1 + Int(next() % 4)) {
                let at = chars.isEmpty ? 0 : Int(next() % UInt64(chars.count + 1))
                switch next() % 3 {
                case 0 where !chars.isEmpty && at < chars.count: chars.remove(at: at)
                case 1: chars.insert(alphabet[Int(next() % UInt64(alphabet.count))], at: at)
                default: if !chars.isEmpty && at < chars.count { chars[at] = alphabet[Int(next() % UInt64(alphabet.count))] }
                }
            }
            let text = String(String.UnicodeScalarView(chars))
            do {
                let template = try WebPushNotification(title: text, body: text, navigate: "https://e.com/" + text, field: "f")
                var out = JSONWriter(capacity: 256)
                template.writeOpening(for: Event(app: "a", path: "/p", body: .value(.object(JSONObject([("f", .string(text))])))), into: &out)
                out.raw("\"x\":1}")
                #expect((try? JSONParser.parse(out.bytes)) != nil)
            } catch {
                #expect(["title", "body", "navigate", "field"].contains(error.member))
            }
        }
    }
}
