@testable import PushCore
@testable import PushEngine
import PushMatching
import Testing

/// Every case of SPEC §6 through the pipeline the service and `replay` share.
@Suite("Matching and events (SPEC §6)")
struct RecordPipelineTests {
    struct NoSealers: SealerProvider {
        func sealer(for subscription: Subscription) throws -> any EventSealer { throw RequestError(.invalid, "v1 only here") }
    }

    static func subscription(
        _ handle: Int64, _ path: String, mode: Mode = .value, app: String = "toto", uid: String = "u1", kind: SubscriptionKind = .fcm
    ) -> Subscription {
        let tuple = SubscriptionTuple(
            app: app, uid: uid, kind: kind, destination: kind == .webhook ? "orders" : nil, path: try! Path(path),
            context: kind == .webhook ? nil : "token-\(handle)")
        return Subscription(
            id: String(format: "%032d", handle), tuple: tuple, mode: mode, format: .v1, encryption: nil, createdAt: 0, expiresAt: 1,
            handle: handle)
    }

    /// Runs lines through a pipeline over `subscriptions`; returns per line the v1 payloads
    /// (or the rejection).
    func run(_ subscriptions: [Subscription], _ lines: [String], maxWeight: Int = 1 << 20) async throws -> [[String]] {
        let store = InMemorySubscriptions(subscriptions)
        var pipeline = RecordPipeline(settings: { $0 == "toto" ? PipelineSettings(maxWeight: maxWeight) : .standard })
        var builder = NotificationBuilder(sealers: NoSealers())
        var results: [[String]] = []
        for line in lines {
            let record: ChangeRecord
            do {
                record = try ChangeRecord.parse(Array(line.utf8))
            } catch {
                results.append(["rejected: \(error.reason)"])
                continue
            }
            let notices = try await pipeline.process(record, lookup: store, directory: store, now: 0, sourceBytes: line.utf8.count).notices
            results.append(try notices.map { String(decoding: try builder.payload($0).bytes, as: UTF8.self) })
        }
        return results
    }

    func put(_ seq: Int, _ path: String, _ data: String, app: String = "toto") -> String {
        #"{"seq":\#(seq),"app":"\#(app)","op":"put","path":"\#(path)","data":\#(data)}"#
    }

    @Test("a write at S, above S and below S each reach S; elsewhere nothing")
    func positions() async throws {
        let subs = [Self.subscription(1, "/a/b")]
        let results = try await run(subs, [
            put(1, "/a/b", #"{"x":1}"#),  // at S
            put(2, "/a", #"{"b":{"x":2}}"#),  // above S
            put(3, "/a/b/x", "3"),  // below S
            put(4, "/a/c", "4"),  // a sibling: S unchanged
            put(5, "/z", "5"),
        ])
        #expect(results == [
            [#"{"s":"OK","t":"value","app":"toto","sp":"/a/b","d":"{\"x\":1}"}"#],
            [#"{"s":"OK","t":"value","app":"toto","sp":"/a/b","d":"{\"x\":2}"}"#],
            [#"{"s":"OK","t":"value","app":"toto","sp":"/a/b","d":"{\"x\":3}"}"#],
            [], [],
        ])
    }

    @Test("put, patch and delete; a patch touching two children of S gives one event")
    func operations() async throws {
        let subs = [Self.subscription(1, "/p", mode: .childEvent)]
        let results = try await run(subs, [
            put(1, "/p", #"{"a":1,"b":2,"c":3}"#),
            #"{"seq":2,"app":"toto","op":"patch","path":"/p","data":{"a":10,"b":null,"d/e":4}}"#,
            put(3, "/p", "null"),
        ])
        #expect(results == [
            [#"{"s":"OK","t":"childEvent","app":"toto","sp":"/p","added":"{\"a\":1,\"b\":2,\"c\":3}","removed":"[]","changed":"{}"}"#],
            [#"{"s":"OK","t":"childEvent","app":"toto","sp":"/p","added":"{\"d\":{\"e\":4}}","removed":"[\"b\"]","changed":"{\"a\":10}"}"#],
            [#"{"s":"OK","t":"childEvent","app":"toto","sp":"/p","added":"{}","removed":"[\"a\",\"c\",\"d\"]","changed":"{}"}"#],
        ])
    }

    @Test("a root subscription sees every write; noData wakes; deletion sends null")
    func rootAndModes() async throws {
        let subs = [Self.subscription(1, "/", mode: .noData), Self.subscription(2, "/x", mode: .value)]
        let results = try await run(subs, [put(1, "/x/y", "1"), put(2, "/x", "null")])
        #expect(results == [
            [#"{"t":"noData","app":"toto","sp":"/"}"#, #"{"s":"OK","t":"value","app":"toto","sp":"/x","d":"{\"y\":1}"}"#],
            [#"{"t":"noData","app":"toto","sp":"/"}"#, #"{"s":"OK","t":"value","app":"toto","sp":"/x","d":"null"}"#],
        ])
    }

    @Test("writes that change nothing send nothing: the same value, 1 and 1.0, a delete of nothing, an empty patch")
    func unchanged() async throws {
        let subs = [Self.subscription(1, "/", mode: .value), Self.subscription(2, "/a", mode: .childEvent)]
        let results = try await run(subs, [
            put(1, "/a", #"{"n":1}"#), put(2, "/a", #"{"n":1}"#), put(3, "/a/n", "1.0"), put(4, "/gone", "null"),
            #"{"seq":5,"app":"toto","op":"patch","path":"/a","data":{}}"#, put(6, "/a/n", "true"),
        ])
        #expect(results[0].count == 2)
        #expect(results[1].isEmpty && results[2].isEmpty && results[3].isEmpty && results[4].isEmpty)
        #expect(results[5].count == 2)  // true is not 1 (SPEC §11.1)
    }

    @Test("arrays are stored as objects keyed by index, null elements dropped")
    func arrays() async throws {
        let subs = [Self.subscription(1, "/l", mode: .value), Self.subscription(2, "/l/2", mode: .value)]
        let results = try await run(subs, [put(1, "/l", "[1,null,3]")])
        #expect(results == [[
            #"{"s":"OK","t":"value","app":"toto","sp":"/l","d":"{\"0\":1,\"2\":3}"}"#,
            #"{"s":"OK","t":"value","app":"toto","sp":"/l/2","d":"3"}"#,
        ]])
    }

    @Test("a childEvent subscription on a primitive hears nothing; a value one does")
    func primitives() async throws {
        let subs = [Self.subscription(1, "/v", mode: .childEvent), Self.subscription(2, "/v", mode: .value, uid: "u2")]
        let results = try await run(subs, [put(1, "/v", "1"), put(2, "/v", "2")])
        #expect(results[0].count == 1 && results[1].count == 1)
    }

    @Test("revoke records: the whole app, one user, a path, both; each revoked once, then gone")
    func revocations() async throws {
        let subs = [
            Self.subscription(1, "/a"), Self.subscription(2, "/a/b", uid: "u2"), Self.subscription(3, "/c"),
            Self.subscription(4, "/a", app: "other"),
        ]
        let results = try await run(subs, [
            #"{"seq":1,"app":"toto","op":"revoke","path":"/a","uid":"u2","reason":"disabled"}"#,
            #"{"seq":2,"app":"toto","op":"revoke","path":"/a/b","reason":"permission_denied"}"#,
            #"{"seq":3,"app":"toto","op":"revoke","reason":"namespace_does_not_exist"}"#,
            put(4, "/", #"{"a":1,"c":2}"#),
            #"{"seq":5,"app":"other","op":"revoke","uid":"u1","reason":"disabled"}"#,
        ])
        #expect(results == [
            [#"{"t":"revoke","r":"disabled","app":"toto","sp":"/a/b"}"#],
            [],
            [#"{"t":"revoke","r":"namespace_does_not_exist","app":"toto","sp":"/a"}"#,
             #"{"t":"revoke","r":"namespace_does_not_exist","app":"toto","sp":"/c"}"#],
            [],
            [#"{"t":"revoke","r":"disabled","app":"other","sp":"/a"}"#],
        ])
    }

    @Test("the weight limit: a value of exactly maxWeight bytes passes, one byte more revokes with too_big")
    func weightLimit() async throws {
        // {"k":"xxxx"} is 8 bytes plus the string's length.
        let subs = [Self.subscription(1, "/w", mode: .value), Self.subscription(2, "/w", mode: .childEvent, uid: "u2")]
        let exact = String(repeating: "x", count: 92)
        let results = try await run(subs, [
            put(1, "/w", #"{"k":"\#(exact)"}"#), put(2, "/w", #"{"k":"\#(exact)y"}"#), put(3, "/w", "1"),
        ], maxWeight: 100)
        #expect(results[0].count == 2 && results[0].allSatisfy { $0.contains("\"s\":\"OK\"") })
        #expect(results[1] == [
            #"{"t":"revoke","r":"too_big","app":"toto","sp":"/w"}"#, #"{"t":"revoke","r":"too_big","app":"toto","sp":"/w"}"#,
        ])
        #expect(results[2].isEmpty)  // revoked: gone
    }

    /// A short line's value is not weighed for subscriptions at or below its path (its length
    /// bounds the value's weight), but a subscription above gets its whole value weighed.
    @Test("a short write below a subscription still has the subscription's whole value weighed")
    func weightAbove() async throws {
        let subs = [Self.subscription(1, "/w", mode: .value), Self.subscription(2, "/w/b", mode: .value, uid: "u2")]
        let long = String(repeating: "x", count: 900)
        let results = try await run(subs, [put(1, "/w/a", #""\#(long)""#), put(2, "/w/b", #""\#(String(repeating: "y", count: 100))""#)], maxWeight: 1_000)
        #expect(results[0].count == 1 && results[0][0].contains("\"s\":\"OK\""))
        // /w now weighs {"a":"x…","b":"y…"} = 1,015 bytes: revoked; /w/b (102 bytes, a 60-byte
        // line) is delivered without being counted.
        #expect(results[1].count == 2)
        #expect(results[1].contains(#"{"t":"revoke","r":"too_big","app":"toto","sp":"/w"}"#))
        #expect(results[1].contains { $0.contains("\"sp\":\"/w/b\"") && $0.contains("\"s\":\"OK\"") })
    }

    @Test("an application absent from the configuration keeps its tree and notifies its subscriptions")
    func unconfiguredApplication() async throws {
        let subs = [Self.subscription(1, "/n", app: "stranger")]
        let results = try await run(subs, [put(1, "/n", "1", app: "stranger"), put(2, "/n", "1", app: "stranger"), put(3, "/n", "2", app: "stranger")])
        #expect(results.map(\.count) == [1, 0, 1])
    }

    @Test("notifications of one record come in subscription-id order")
    func order() async throws {
        let subs = [Self.subscription(3, "/a"), Self.subscription(1, "/a/b"), Self.subscription(2, "/")]
        let results = try await run(subs, [put(1, "/a/b", "1")])
        #expect(results[0].map { $0.contains("\"sp\":\"/\"") ? 2 : $0.contains("/a/b") ? 1 : 3 } == [1, 2, 3])
    }

    @Test("a webhook gets the plain event in its body; its limit degrades a value to TooBig")
    func webhooks() async throws {
        let subs = [Self.subscription(1, "/h", kind: .webhook)]
        let store = InMemorySubscriptions(subs)
        var pipeline = RecordPipeline(settings: { _ in .standard })
        var builder = NotificationBuilder(sealers: NoSealers(), webhookLimit: 64)
        let first = try await pipeline.process(try ChangeRecord.parse(Array(put(1, "/h", "1").utf8)), lookup: store, directory: store, now: 0).notices
        let second = try await pipeline.process(
            try ChangeRecord.parse(Array(put(2, "/h", #""\#(String(repeating: "b", count: 100))""#).utf8)), lookup: store, directory: store, now: 0
        ).notices
        #expect(String(decoding: try builder.payload(first[0]).bytes, as: UTF8.self)
            == #"{"app":"toto","uid":"u1","subscription":"00000000000000000000000000000001","path":"/h","context":null,"event":{"t":"v","m":"value","a":"toto","p":"/h","s":"OK","v":1}}"#)
        #expect(String(decoding: try builder.payload(second[0]).bytes, as: UTF8.self).hasSuffix(#""event":{"t":"v","m":"value","a":"toto","p":"/h","s":"TooBig"}}"#))
    }
}
