import PushContracts
@testable import PushCore
@testable import PushEngine
import PushJSON
import PushMatching
import Testing

/// Read access after writes (SPEC §12.5) through the record pipeline: a subscription whose
/// evaluation read what a write changed is evaluated again against the tree after it; denied,
/// it is revoked with `permission_denied` instead of receiving the record's event.
@Suite("Read access after writes")
struct AccessPipelineTests {
    static let membership = try! ReadRules.parse(
        try! JSONParser.parse(Array(#"{"rules":{"rooms":{"$room":{".read":"root.child('members/' + $room + '/' + auth.uid).exists()"}}}}"#.utf8)))

    static func subscription(_ handle: Int64, _ path: String, uid: String, mode: Mode = .value) -> Subscription {
        var subscription = RecordPipelineTests.subscription(handle, path, mode: mode, uid: uid)
        subscription.auth = ["sub": .string(uid)]
        return subscription
    }

    /// Runs lines through a pipeline with the membership rules; per line, the notices as
    /// `handle:body` (`revoke(permission_denied)` or the event's kind).
    static func run(_ subscriptions: [Subscription], _ lines: [String], admitted: [Int64] = [], tree: String? = nil) async throws -> [[String]] {
        let store = InMemorySubscriptions(subscriptions)
        var pipeline = RecordPipeline(settings: { _ in PipelineSettings(maxWeight: 1 << 20, rules: membership) })
        if let tree {
            pipeline.processor.setTree(DataTree(root: try JSONParser.parse(Array(tree.utf8))), app: "toto")
        }
        // Subscriptions evaluated before the lines (as at start): admitted with what they read.
        for handle in admitted {
            let subscription = subscriptions.first { $0.handle == handle }!
            let auth = ReadRules.auth(uid: subscription.uid, claims: subscription.auth)
            let decision = membership.evaluate(path: subscription.path, auth: auth, tree: pipeline.processor.trees["toto"] ?? DataTree(), now: 0)
            #expect(decision.allowed)
            store.admit(handle, app: "toto", path: subscription.path, auth: auth, reads: decision.reads)
        }
        var results: [[String]] = []
        for line in lines {
            let record = try ChangeRecord.parse(Array(line.utf8))
            let notices = try await pipeline.process(record, lookup: store, directory: store, now: 0).notices
            results.append(describe(notices))
        }
        return results
    }

    /// `handle:body` of each notice.
    static func describe(_ notices: [Notice]) -> [String] {
        notices.map { notice in
            switch notice.event.body {
            case .revoke(let reason): "\(notice.subscription.handle ?? 0):revoke(\(reason.rawValue))"
            default: "\(notice.subscription.handle ?? 0):\(NotificationKind(notice.event).rawValue)"
            }
        }
    }

    static let members = #"{"members":{"r1":{"alice":true,"bob":true}},"rooms":{"r1":{"title":"Lunch"}}}"#

    @Test("removing a member revokes her room subscription instead of telling her; the records after it reach her no more")
    func removal() async throws {
        let results = try await Self.run(
            [Self.subscription(1, "/rooms/r1", uid: "alice"), Self.subscription(2, "/rooms/r1", uid: "bob")],
            [
                #"{"seq":1,"app":"toto","op":"put","path":"/members/r1/alice","data":null}"#,
                #"{"seq":2,"app":"toto","op":"put","path":"/rooms/r1/title","data":"Dinner"}"#,
                #"{"seq":3,"app":"toto","op":"put","path":"/members/r1/alice","data":true}"#,
                #"{"seq":4,"app":"toto","op":"put","path":"/rooms/r1/title","data":"Supper"}"#,
            ],
            admitted: [1, 2], tree: Self.members)
        #expect(results == [["1:revoke(permission_denied)"], ["2:value"], [], ["2:value"]])
    }

    @Test("rules with now are evaluated again at each record a subscription would receive: past the deadline it is revoked, not told (issue 33)")
    func deadline() async throws {
        let rules = try ReadRules.parse(try JSONParser.parse(Array(#"{"rules":{"open":{".read":"auth != null && now < 1000"}}}"#.utf8)))
        #expect(rules.readsNow && !rules.readsData && rules.rechecked)
        let subscriptions = [Self.subscription(1, "/open", uid: "alice"), Self.subscription(2, "/open/x", uid: "bob")]
        let store = InMemorySubscriptions(subscriptions)
        var pipeline = RecordPipeline(settings: { _ in PipelineSettings(maxWeight: 1 << 20, rules: rules) })
        // Alice was admitted before the deadline (with what her evaluation read: nothing);
        // Bob never was (created meanwhile): both are checked at each record's time.
        let auth = ReadRules.auth(uid: "alice", claims: subscriptions[0].auth)
        store.admit(1, app: "toto", path: subscriptions[0].path, auth: auth, reads: rules.evaluate(path: subscriptions[0].path, auth: auth, tree: DataTree(), now: 0).reads)
        var results: [[String]] = []
        for (seq, now) in [(1, Int64(500)), (2, 1_500), (3, 1_600)] {
            let record = try ChangeRecord.parse(Array(#"{"seq":\#(seq),"app":"toto","op":"put","path":"/open/x","data":\#(seq)}"#.utf8))
            results.append(Self.describe(try await pipeline.process(record, lookup: store, directory: store, now: now).notices).sorted())
        }
        #expect(results == [["1:value", "2:value"], ["1:revoke(permission_denied)", "2:revoke(permission_denied)"], []])
    }

    @Test("a write that removes the member and changes the room in one patch: she gets the revocation, not the event")
    func patch() async throws {
        let results = try await Self.run(
            [Self.subscription(1, "/rooms/r1", uid: "alice")],
            [#"{"seq":1,"app":"toto","op":"patch","path":"/","data":{"members/r1/alice":null,"rooms/r1/title":"Secret"}}"#],
            admitted: [1], tree: Self.members)
        #expect(results == [["1:revoke(permission_denied)"]])
    }

    @Test("a subscription never evaluated against this data is checked before its first event")
    func unadmitted() async throws {
        // Carol was never a member: her subscription (created while a race let it through) is
        // revoked at the first record that would have told her something.
        let results = try await Self.run(
            [Self.subscription(3, "/rooms/r1", uid: "carol"), Self.subscription(1, "/rooms/r1", uid: "alice")],
            [#"{"seq":1,"app":"toto","op":"put","path":"/rooms/r1/title","data":"Dinner"}"#], tree: Self.members)
        #expect(results == [["1:value", "3:revoke(permission_denied)"]])
    }

    @Test("a write that changes nothing a subscription's evaluation read leaves it alone")
    func unrelated() async throws {
        let results = try await Self.run(
            [Self.subscription(1, "/rooms/r1", uid: "alice")],
            [
                #"{"seq":1,"app":"toto","op":"put","path":"/members/r2/alice","data":null}"#,
                #"{"seq":2,"app":"toto","op":"put","path":"/members/r1/bob","data":null}"#,
            ],
            admitted: [1], tree: #"{"members":{"r1":{"alice":true,"bob":true},"r2":{"alice":true}}}"#)
        #expect(results == [[], []])
    }

    @Test("a write finds the subscriptions it may affect through their reads, never by looking at all of them")
    func proportional() {
        var index = AccessIndex()
        for room in 0..<200 {
            for user in 0..<50 {
                let handle = Int64(room * 50 + user + 1)
                let path = Path(uncheckedKeys: ["rooms", Key("r\(room)")])
                index.admit(handle, app: "toto", path: path, auth: ["uid": .string("u\(user)")], reads: [Path(uncheckedKeys: ["members", Key("r\(room)"), Key("u\(user)")])])
            }
        }
        #expect(index.count == 10_000)
        #expect(index.affected(app: "toto", path: Path(uncheckedKeys: ["members", "r7", "u3"])) == [7 * 50 + 3 + 1])
        #expect(index.affected(app: "toto", path: Path(uncheckedKeys: ["members", "r7"])).count == 50)
        #expect(index.affected(app: "toto", path: Path(uncheckedKeys: ["rooms", "r7"])).isEmpty)
        #expect(index.affected(app: "other", path: .root).isEmpty)
        index.forget(7 * 50 + 3 + 1)
        #expect(index.affected(app: "toto", path: Path(uncheckedKeys: ["members", "r7", "u3"])).isEmpty)
        #expect(index.count == 9_999)
    }

    @Test("staging leaves the lookup as it was: later records see what earlier ones did through the overlay, the lookup once it is applied")
    func effectsAreValues() async throws {
        let store = InMemorySubscriptions([
            Self.subscription(1, "/rooms/r1", uid: "alice"), Self.subscription(2, "/rooms/r1", uid: "bob"), Self.subscription(3, "/rooms/r1", uid: "carol"),
        ])
        var pipeline = RecordPipeline(settings: { _ in PipelineSettings(maxWeight: 1 << 20, rules: Self.membership) })
        pipeline.processor.setTree(DataTree(root: try JSONParser.parse(Array(Self.members.utf8))), app: "toto")
        var overlay = IndexOverlay()
        var results: [[String]] = []
        for line in [
            // Never evaluated: Alice and Bob are admitted, Carol revoked.
            #"{"seq":1,"app":"toto","op":"put","path":"/rooms/r1/title","data":"Dinner"}"#,
            // What Alice's admission read changes: she is evaluated again, and revoked.
            #"{"seq":2,"app":"toto","op":"put","path":"/members/r1/alice","data":null}"#,
            #"{"seq":3,"app":"toto","op":"put","path":"/rooms/r1/title","data":"Supper"}"#,
        ] {
            let staged = try await pipeline.stage(try ChangeRecord.parse(Array(line.utf8)), lookup: store, directory: store, overlay: &overlay, now: 0)
            results.append(Self.describe(staged.notices.resolve(try await store.subscriptions(handles: staged.notices.handles))))
        }
        #expect(results == [["1:value", "2:value", "3:revoke(permission_denied)"], ["1:revoke(permission_denied)"], ["2:value"]])
        #expect(overlay.effects.forgottenHandles == [3, 1])
        #expect(overlay.effects.admitted.map(\.handle) == [1, 2])
        #expect(store.under(app: "toto", path: .root).map(\.handle).sorted() == [1, 2, 3])
        #expect(!store.isAdmitted(1) && !store.isAdmitted(2))

        store.apply(overlay.effects)
        #expect(store.under(app: "toto", path: .root).map(\.handle) == [2])
        #expect(store.isAdmitted(2))
        #expect(!store.isAdmitted(1))
        #expect(store.accessEntry(2)?.reads.map(\.string) == ["/members/r1/bob"])
    }
}
