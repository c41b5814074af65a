import PushCore
import PushJSON
import PushDispatchClient
import PushJOSE
import PushTestSupport
import Testing

/// Every event, in every format and protection the service writes, made by the service's own
/// builders and sealers, reads back as what was written.
@Suite("Notifications read back as the service wrote them")
struct NotificationReaderTests {
    static let large = JSON.string(String(repeating: "x", count: 1500))

    /// Events of every kind and status: name, event.
    static let events: [(String, Event)] = [
        ("value", Event(app: "toto", path: "/a/b", body: .value(["n": 1, "s": "é\n"]))),
        ("value deleted", Event(app: "toto", path: "/a", body: .value(nil))),
        ("value too big", Event(app: "toto", path: "/a", body: .value(["a": large, "b": large, "c": large]))),
        ("noData", Event(app: "toto", path: "/", body: .noData)),
        ("childEvent", Event(app: "toto", path: "/c", body: .childEvent(ChildDiff(before: ["x": 1, "y": 2], after: ["y": 3, "z": ["q": true]])))),
        ("childEvent only keys", Event(app: "toto", path: "/c", body: .childEvent(ChildDiff(before: nil, after: ["k1": large, "k2": large, "k3": large])))),
        ("childEvent too big", Event(app: "toto", path: "/c", body: .childEvent(ChildDiff(before: nil, after: .object(JSONObject((0..<400).map { (Key("key-number-\($0)"), JSON.int(1)) })))))),
        ("revoke expired", Event(app: "toto", path: "/r", body: .revoke(.expired))),
        ("revoke too_big", Event(app: "toto", path: "/r", body: .revoke(.tooBig))),
    ]

    /// What the library should read for `event` sent with `status`.
    static func expected(_ event: Event, _ status: PayloadStatus) -> (NotificationEvent, PushNotification.FollowUp) {
        switch event.body {
        case .noData: return (.noData, .readNode)
        case .value(let value): return status == .ok ? (.value(value), .none) : (.value(nil), .readNode)
        case .revoke(let reason): return (.revoked(RevocationReason(reason.rawValue)), reason == .expired ? .subscribeAgain : .subscriptionEnded)
        case .childEvent(let diff):
            func map(_ members: ContiguousArray<JSONObject.Member>) -> [String: JSON] {
                Dictionary(uniqueKeysWithValues: members.map { ($0.key.string, status == .onlyKeys ? JSON.bool(true) : $0.value) })
            }
            switch status {
            case .tooBig: return (.childEvent(ChildChanges(added: [:], changed: [:], removed: [])), .readNode)
            case .ok, .onlyKeys:
                let changes = ChildChanges(added: map(diff.added), changed: map(diff.changed), removed: diff.removed.map(\.string))
                let keys = (diff.added + diff.changed).map(\.key).sorted().map(\.string)
                return (.childEvent(changes), status == .ok ? .none : .readChildren(keys))
            }
        }
    }

    static func protection(_ protection: PayloadFixtures.Protection) -> PushNotification.Protection {
        switch protection {
        case .v1: return .none
        case .es256, .hs256, .eddsa: return .signed
        case .dir, .a128kw, .a256kw: return .sharedKey
        case .ecdhES, .ecdhESA256KW: return .endToEnd
        }
    }

    @Test("every event reads back, as a data map and as JSON text", arguments: PayloadFixtures.Protection.allCases)
    func readsBack(protection: PayloadFixtures.Protection) throws {
        let reader = try NotificationReader(app: "toto", keys: PayloadFixtures.readerKeys)
        var statuses: Set<PayloadStatus> = []
        for (name, event) in Self.events {
            let (bytes, status) = try PayloadFixtures.payload(event, protection)
            statuses.insert(status)
            let (expectedEvent, followUp) = Self.expected(event, status)
            let expected = PushNotification(
                app: "toto", path: event.path, event: expectedEvent, status: status, format: protection == .v1 ? .v1 : .v2,
                protection: Self.protection(protection))
            let fromMap = try reader.read(try PayloadFixtures.dataMap(bytes))
            #expect(fromMap == expected, "\(name)")
            #expect(fromMap.followUp == followUp, "\(name)")
            #expect(try reader.read(json: bytes) == expected, "\(name)")
        }
        #expect(statuses == [.ok, .onlyKeys, .tooBig], "the events cover every status")
    }

    @Test(
        "what is not a notification of this application is refused with what was wrong",
        arguments: [
            ("not JSON", #"{"t":"noData""#, NotificationError.Code.malformed, "not JSON"),
            ("an array", #"["t"]"#, .malformed, "a JSON object"),
            ("a number field", #"{"t":"noData","app":"toto","sp":1}"#, .malformed, "every value is a string"),
            ("v1 without sp", #"{"t":"noData","app":"toto"}"#, .malformed, "\"sp\""),
            ("v1 of another app", #"{"t":"noData","app":"titi","sp":"/a"}"#, .otherApplication, "\"titi\""),
            ("v1 bad path", #"{"t":"noData","app":"toto","sp":"/a/../b"}"#, .malformed, "not canonical"),
            ("v1 bad key", #"{"t":"noData","app":"toto","sp":"/a.b"}"#, .malformed, "'.'"),
            ("unknown ver", #"{"srv":"webcom","evt":"a.b.c","ver":"v3"}"#, .malformed, "\"v3\""),
            ("v2 evt of 2 parts", #"{"srv":"webcom","evt":"a.b","ver":"v2"}"#, .malformed, "neither a compact JWS"),
            ("v2 without srv", #"{"evt":"a.b.c","ver":"v2"}"#, .malformed, "srv"),
            ("v2 kid without JWE", #"{"srv":"webcom","kid":"k","evt":"a.b.c","ver":"v2"}"#, .malformed, "kid"),
            ("duplicate field", #"{"t":"noData","t":"noData","app":"toto","sp":"/a"}"#, .malformed, "not JSON"),
        ])
    func refused(name: String, payload: String, code: NotificationError.Code, mentions: String) throws {
        let reader = try NotificationReader(app: "toto", keys: PayloadFixtures.readerKeys)
        #expect {
            try reader.read(json: Array(payload.utf8))
        } throws: { error in
            guard let error = error as? NotificationError else { return false }
            return error.code == code && error.message.contains(mentions)
        }
    }

    /// Signs an event as the application would, with `sig-es`.
    static func signed(_ event: String) throws -> [String: String] {
        let key = try #require(PayloadFixtures.keyset.key(kid: "sig-es", use: .signature))
        let token = String(decoding: try JWSSigner(key: key).sign(Array(event.utf8)), as: UTF8.self)
        return ["srv": "webcom", "evt": token, "ver": "v2"]
    }

    @Test(
        "a genuinely signed event that is not one the service writes is refused",
        arguments: [
            (#"{"t":"v","m":"value","a":"toto","p":"/a","s":"OK","v":1,"x":2}"#, "unexpected field \"x\""),
            (#"{"t":"v","m":"value","a":"toto","p":"/a","s":"OK"}"#, "carries v"),
            (#"{"t":"v","m":"value","a":"toto","p":"/a","s":"OnlyKeys"}"#, "not OnlyKeys"),
            (#"{"t":"v","m":"value","a":"toto","p":"/a","s":"Fine","v":1}"#, "\"Fine\""),
            (#"{"t":"v","m":"childEvent","a":"toto","p":"/a","s":"OnlyKeys","c":{"a":{"k":1},"r":[],"c":{}}}"#, "true for every value"),
            (#"{"t":"v","m":"childEvent","a":"toto","p":"/a","s":"TooBig","c":{"a":{},"r":["k"],"c":{}}}"#, "carries no children"),
            (#"{"t":"v","m":"childEvent","a":"toto","p":"/a","s":"OK","c":{"a":{},"r":[1],"c":{}}}"#, "not a key"),
            (#"{"t":"v","m":"everything","a":"toto","p":"/a"}"#, "\"everything\""),
            (#"{"t":"x","a":"toto","p":"/a"}"#, "lacks t (\"v\" or \"r\")"),
            (#"{"t":"r","a":"toto","p":"a"}"#, "not canonical"),
        ])
    func strictEvents(event: String, mentions: String) throws {
        let reader = try NotificationReader(app: "toto", keys: PayloadFixtures.readerKeys)
        #expect {
            try reader.read(try Self.signed(event))
        } throws: { error in
            (error as? NotificationError)?.code == .malformed && (error as? NotificationError)?.message.contains(mentions) == true
        }
    }

    @Test("an unknown revocation reason is kept as written; keys the reader lacks are an unknown kid")
    func unknownReasonAndKeys() throws {
        let reader = try NotificationReader(app: "toto", keys: PayloadFixtures.readerKeys)
        let revoked = try reader.read(try Self.signed(#"{"t":"r","a":"toto","p":"/a","r":"moved_elsewhere"}"#))
        #expect(revoked.event == .revoked(.unknown("moved_elsewhere")) && revoked.followUp == .subscriptionEnded)
        let bare = try NotificationReader(app: "toto", keys: [])
        let (bytes, _) = try PayloadFixtures.payload(Event(app: "toto", path: "/a", body: .noData), .es256)
        #expect(throws: NotificationError(.unknownKey, "")) { try bare.read(json: bytes) }
        let (encrypted, _) = try PayloadFixtures.payload(Event(app: "toto", path: "/a", body: .noData), .ecdhES)
        #expect(throws: NotificationError(.unknownKey, "")) { try bare.read(json: encrypted) }
        #expect(throws: NotificationError(.tooLarge, "")) { try reader.read(["big": String(repeating: "x", count: 20_000)]) }
    }

    @Test("provider fields are dropped from a userInfo or data map; the service's are kept")
    func dataMaps() throws {
        let userInfo: [AnyHashable: Any] = [
            "srv": "webcom", "evt": "a.b.c", "ver": "v2", "gcm.message_id": "1", "google.c.a.e": "1", "aps": ["content-available": 1],
            "from": "123", 7: "seven", "count": 3,
        ]
        #expect(DataMap.from(userInfo: userInfo) == ["srv": "webcom", "evt": "a.b.c", "ver": "v2"])
        #expect(DataMap.from(["t": "noData", "collapse_key": "x", "google.sent_time": "1"]) == ["t": "noData"])
    }
}
