import PushCore
import PushJSON
@testable import PushMatching
import PushTestSupport
import Testing

/// Read rules (SPEC §12): the examples of the Firebase Realtime Database documentation, each
/// as a row with the expected answer; parse errors with their rule and column; and hostile
/// input.
@Suite("Read rules")
struct ReadRulesTests {
    static let now: Int64 = 1_800_000_000_000

    static func rules(_ text: String) throws -> ReadRules {
        try ReadRules.parse(try JSONParser.parse(Array(text.utf8)))
    }

    static func tree(_ text: String) throws -> DataTree {
        let json = try JSONParser.parse(Array(text.utf8))
        return DataTree(root: json.isNull ? nil : json)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var rules: String
        var data = "null"
        var path: String
        var uid: String? = "alice"
        var claims = "{}"
        var allowed: Bool
        var testDescription: String { name }
    }

    static let membership = #"{"rules":{"rooms":{"$room":{".read":"root.child('members').child($room).child(auth.uid).exists()"}}}}"#
    static let roomData = #"{"members":{"r1":{"alice":true}},"rooms":{"r1":{"title":"Lunch"},"r2":{"title":"Secret"}}}"#

    static let cases: [Case] = [
        // Cascading: a grant covers the subtree; a deeper false does not take it back.
        Case(name: "cascade: a grant at /foo covers /foo/bar despite its false", rules: #"{"rules":{"foo":{".read":true,"bar":{".read":false}}}}"#, path: "/foo/bar", allowed: true),
        Case(name: "cascade: the grant covers /foo itself", rules: #"{"rules":{"foo":{".read":true,"bar":{".read":false}}}}"#, path: "/foo", allowed: true),
        Case(name: "cascade: nothing grants the root", rules: #"{"rules":{"foo":{".read":true}}}"#, path: "/", allowed: false),
        Case(name: "cascade: a node with no rule on its way is denied", rules: #"{"rules":{"foo":{".read":true}}}"#, path: "/other/x", allowed: false),
        // Rules are not filters.
        Case(name: "not filters: grants on some children do not allow the parent", rules: #"{"rules":{"records":{"rec1":{".read":true},"rec2":{".read":false}}}}"#, path: "/records", allowed: false),
        Case(name: "not filters: the granted child", rules: #"{"rules":{"records":{"rec1":{".read":true},"rec2":{".read":false}}}}"#, path: "/records/rec1", allowed: true),
        Case(name: "not filters: the denied child", rules: #"{"rules":{"records":{"rec1":{".read":true},"rec2":{".read":false}}}}"#, path: "/records/rec2", allowed: false),
        // $ captures and auth.uid == $uid.
        Case(name: "own subtree: alice reads /users/alice", rules: #"{"rules":{"users":{"$uid":{".read":"auth != null && auth.uid == $uid"}}}}"#, path: "/users/alice", allowed: true),
        Case(name: "own subtree: and below it", rules: #"{"rules":{"users":{"$uid":{".read":"auth.uid == $uid"}}}}"#, path: "/users/alice/inbox/m1", allowed: true),
        Case(name: "own subtree: alice does not read /users/bob", rules: #"{"rules":{"users":{"$uid":{".read":"auth.uid == $uid"}}}}"#, path: "/users/bob", allowed: false),
        Case(name: "own subtree: nor /users", rules: #"{"rules":{"users":{"$uid":{".read":"auth.uid == $uid"}}}}"#, path: "/users", allowed: false),
        Case(name: "a literal key is matched before the $ key", rules: #"{"rules":{"users":{"public":{".read":true},"$uid":{".read":"auth.uid == $uid"}}}}"#, path: "/users/public/x", allowed: true),
        Case(name: "without auth, auth != null is false", rules: #"{"rules":{".read":"auth != null"}}"#, path: "/a", uid: nil, allowed: false),
        Case(name: "the default rules: any authenticated client", rules: #"{"rules":{".read":"auth != null"}}"#, path: "/a/b", allowed: true),
        // Membership through root.child(…).
        Case(name: "membership: a member reads her room", rules: membership, data: roomData, path: "/rooms/r1", allowed: true),
        Case(name: "membership: not another room", rules: membership, data: roomData, path: "/rooms/r2", allowed: false),
        Case(name: "membership: nor a room of no one", rules: membership, data: roomData, path: "/rooms/r9/title", allowed: false),
        Case(
            name: "membership through data.parent(): a room's topic", rules: #"{"rules":{"rooms":{"$room":{"topic":{".read":"data.parent().child('members').hasChild(auth.uid)"}}}}}"#,
            data: #"{"rooms":{"r1":{"members":{"alice":true},"topic":"t"}}}"#, path: "/rooms/r1/topic", allowed: true),
        // data.child(…).
        Case(
            name: "data.child: a public profile", rules: #"{"rules":{"users":{"$uid":{".read":"data.child('visibility').val() == 'public' || auth.uid == $uid"}}}}"#,
            data: #"{"users":{"bob":{"visibility":"public"},"carol":{"visibility":"private"}}}"#, path: "/users/bob", allowed: true),
        Case(
            name: "data.child: a private one", rules: #"{"rules":{"users":{"$uid":{".read":"data.child('visibility').val() == 'public' || auth.uid == $uid"}}}}"#,
            data: #"{"users":{"bob":{"visibility":"public"},"carol":{"visibility":"private"}}}"#, path: "/users/carol", allowed: false),
        Case(
            name: "hasChildren with names", rules: #"{"rules":{"$item":{".read":"data.hasChildren(['name', 'age'])"}}}"#,
            data: #"{"i1":{"name":"n","age":3},"i2":{"name":"n"}}"#, path: "/i1", allowed: true),
        Case(
            name: "hasChildren with names: one missing", rules: #"{"rules":{"$item":{".read":"data.hasChildren(['name', 'age'])"}}}"#,
            data: #"{"i1":{"name":"n","age":3},"i2":{"name":"n"}}"#, path: "/i2", allowed: false),
        Case(
            name: "now: an offer not yet expired", rules: #"{"rules":{"offers":{"$id":{".read":"data.child('expires').val() > now"}}}}"#,
            data: #"{"offers":{"a":{"expires":1900000000000},"b":{"expires":1700000000000}}}"#, path: "/offers/a", allowed: true),
        Case(
            name: "now: an expired offer", rules: #"{"rules":{"offers":{"$id":{".read":"data.child('expires').val() > now"}}}}"#,
            data: #"{"offers":{"a":{"expires":1900000000000},"b":{"expires":1700000000000}}}"#, path: "/offers/b", allowed: false),
        // Custom claims.
        Case(name: "custom claim: an admin", rules: #"{"rules":{".read":"auth.token.admin === true"}}"#, path: "/x", claims: #"{"admin":true}"#, allowed: true),
        Case(name: "custom claim: missing is null, not true", rules: #"{"rules":{".read":"auth.token.admin === true"}}"#, path: "/x", allowed: false),
        Case(
            name: "claims and string methods: a verified corporate address",
            rules: #"{"rules":{".read":"auth.token.email_verified == true && auth.token.email.toLowerCase().endsWith('@example.com')"}}"#, path: "/x",
            claims: #"{"email":"Alice@EXAMPLE.com","email_verified":true}"#, allowed: true),
        Case(
            name: "replace: an escaped e-mail as a key", rules: #"{"rules":{"inbox":{".read":"root.child('allowed').child(auth.token.email.replace('.', ',')).exists()"}}}"#,
            data: #"{"allowed":{"alice@example,com":true}}"#, path: "/inbox", claims: #"{"email":"alice@example.com"}"#, allowed: true),
        Case(name: "strings: beginsWith on a capture", rules: #"{"rules":{"$key":{".read":"$key.beginsWith('pub_') && $key.length > 4"}}}"#, path: "/pub_x", allowed: true),
        Case(name: "strings: contains", rules: #"{"rules":{"$key":{".read":"$key.contains('open')"}}}"#, path: "/closed", allowed: false),
        Case(name: "arithmetic and the ternary", rules: #"{"rules":{".read":"(2 + 3 * 4) % 5 == 4 ? 'a' + 1 == 'a1' : false"}}"#, path: "/", allowed: true),
        Case(name: "isString, isNumber, isBoolean", rules: #"{"rules":{".read":"root.child('s').isString() && root.child('n').isNumber() && root.child('b').isBoolean() && !root.child('s').isNumber()"}}"#, data: #"{"s":"x","n":1.5,"b":false}"#, path: "/", allowed: true),
        // Errors make the rule false, never the request an error.
        Case(name: "an error: a method on null", rules: #"{"rules":{".read":"root.child('nothing').val().length > 2"}}"#, path: "/", allowed: false),
        Case(name: "an error: division by zero", rules: #"{"rules":{".read":"1 / 0 > 0"}}"#, path: "/", allowed: false),
        Case(name: "an error: a type mismatch", rules: #"{"rules":{".read":"'a' < 1"}}"#, path: "/", allowed: false),
        Case(name: "an error on the way does not stop a deeper grant", rules: #"{"rules":{".read":"auth.token.x.y == 1","a":{".read":true}}}"#, path: "/a", allowed: true),
        Case(name: "a rule that is not a boolean is false", rules: #"{"rules":{".read":"'yes'"}}"#, path: "/", allowed: false),
        Case(name: "== is strict: 1 is not true", rules: #"{"rules":{".read":"root.child('flag').val() == true"}}"#, data: #"{"flag":1}"#, path: "/", allowed: false),
        // Integers compare exactly (issue 33: a token id of 2^53 + 1 matched data holding 2^53).
        Case(
            name: "integers exactly: a claim of 2^53 + 1 is not the 2^53 the data holds",
            rules: #"{"rules":{".read":"root.child('owner').val() == auth.token.id"}}"#, data: #"{"owner":9007199254740992}"#, path: "/",
            claims: #"{"id":9007199254740993}"#, allowed: false),
        Case(
            name: "integers exactly: the same integer is granted",
            rules: #"{"rules":{".read":"root.child('owner').val() == auth.token.id"}}"#, data: #"{"owner":9007199254740993}"#, path: "/",
            claims: #"{"id":9007199254740993}"#, allowed: true),
        Case(name: "integers exactly: a literal beyond 2^53", rules: #"{"rules":{".read":"auth.token.id > 9007199254740992"}}"#, path: "/", claims: #"{"id":9007199254740993}"#, allowed: true),
        Case(name: "integers exactly: 2^53 + 1 is above the double 2^53", rules: #"{"rules":{".read":"auth.token.id > 9007199254740992.0"}}"#, path: "/", claims: #"{"id":9007199254740993}"#, allowed: true),
        Case(name: "an integer equals the same double", rules: #"{"rules":{".read":"root.child('n').val() == 2.0 && 3 / 2 == 1.5 && 4 / 2 == 2"}}"#, data: #"{"n":2}"#, path: "/", allowed: true),
        Case(name: "integer arithmetic past 64 bits goes on as doubles: 2^63 is above 2^63 - 1", rules: #"{"rules":{".read":"9223372036854775807 + 1 > 9223372036854775807"}}"#, path: "/", allowed: true),
    ]

    @Test("a search in 4 MiB of data with a 760-byte key is linear and bounded in bytes, not only in steps (issue 33: 0.81 s before; timed in docs/benchmarks.md)")
    func searchCost() throws {
        let big = String(repeating: "a", count: 4 << 20)
        let key = String(repeating: "a", count: 759) + "b"
        let tree = DataTree(root: .object(JSONObject([("doc", .string(big))])))
        let auth = ReadRules.auth(uid: key, claims: nil)
        let contains = try Self.rules(#"{"rules":{".read":"root.child('doc').val().contains(auth.uid)"}}"#)
        var decision = contains.evaluate(path: .root, auth: auth, tree: tree, now: Self.now)
        #expect(!decision.allowed && decision.trace.allSatisfy { !"\($0)".contains("MiB of strings") }, "\(decision.trace)")
        // Twice over 4 MiB is past the budget: refused with why, quickly.
        let twice = try Self.rules(#"{"rules":{".read":"root.child('doc').val().contains(auth.uid) || root.child('doc').val().contains(auth.uid + 'c')"}}"#)
        decision = twice.evaluate(path: .root, auth: auth, tree: tree, now: Self.now)
        #expect(!decision.allowed)
        #expect(decision.trace.contains { "\($0)".contains("MiB of strings") }, "\(decision.trace)")
        // toUpperCase of 4 MiB is refused before any work.
        let upper = try Self.rules(#"{"rules":{".read":"root.child('doc').val().toUpperCase() == ''"}}"#)
        decision = upper.evaluate(path: .root, auth: auth, tree: tree, now: Self.now)
        #expect(!decision.allowed && decision.trace.contains { "\($0)".contains("toUpperCase() of a string beyond") }, "\(decision.trace)")
        // KMP finds what a naive search finds.
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let haystack = (0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 97...99, using: &random) }
            let needle = (0..<Int.random(in: 1...5, using: &random)).map { _ in UInt8.random(in: 97...99, using: &random) }
            let start = Int.random(in: 0...max(0, haystack.count), using: &random)
            var naive: Int?
            if haystack.count >= needle.count, start <= haystack.count - needle.count {
                naive = (start...(haystack.count - needle.count)).first { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
            }
            #expect(RuleEvaluator.find(needle, in: haystack, from: start) == naive, "\(haystack) \(needle) \(start)")
        }
    }

    @Test("each documented example answers as the Firebase rules would", arguments: cases)
    func examples(_ example: Case) throws {
        let rules = try Self.rules(example.rules)
        let auth = example.uid.map { ReadRules.auth(uid: $0, claims: try? JSONParser.parse(Array(example.claims.utf8))) }
        let decision = rules.evaluate(path: try Path(example.path), auth: auth, tree: try Self.tree(example.data), now: Self.now)
        #expect(decision.allowed == example.allowed, "\(decision.trace)")
    }

    @Test("an evaluation remembers what it read, and only that")
    func reads() throws {
        let member = try Self.rules(Self.membership).evaluate(
            path: try Path("/rooms/r1/title"), auth: ReadRules.auth(uid: "alice", claims: nil), tree: try Self.tree(Self.roomData), now: Self.now)
        let expected = [try Path("/members/r1/alice")]
        #expect(member.allowed && member.reads == expected)
        #expect(member.grantedBy == "rules/rooms/$room/.read")
        let own = try Self.rules(#"{"rules":{"users":{"$uid":{".read":"auth.uid == $uid"}}}}"#)
        #expect(!own.readsData && ReadRules.authenticated.readsData == false)
        let alice = try Path("/users/alice")
        #expect(own.evaluate(path: alice, auth: ReadRules.auth(uid: "alice", claims: nil), tree: DataTree(), now: 0).reads.isEmpty)
        let membership = try Self.rules(Self.membership)
        #expect(membership.readsData)
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        var rules: String
        var expected: String
        var testDescription: String { expected }
    }

    @Test(
        "a rule that does not parse, or uses what the subset leaves out, is refused with its location and column",
        arguments: [
            Refusal(rules: #"{"rules":{"a":{".read":"data.val().matches('x')"}}}"#, expected: "rules/a/.read, column 12: matches() is not supported"),
            Refusal(rules: #"{"rules":{"a":{".read":"newData.exists()"}}}"#, expected: "rules/a/.read, column 1: newData is for .write and .validate rules"),
            Refusal(rules: #"{"rules":{"a":{".read":"$room == 'x'"}}}"#, expected: "rules/a/.read, column 1: $room is not captured on the way to this rule"),
            Refusal(rules: #"{"rules":{"a":{".read":"auth.uid = 'x'"}}}"#, expected: "rules/a/.read, column 10: = alone is not an operator"),
            Refusal(rules: #"{"rules":{"a":{".read":"data['x']"}}}"#, expected: "rules/a/.read, column 5: brackets are not supported"),
            Refusal(rules: #"{"rules":{"a":{".read":"data.getPriority() == 1"}}}"#, expected: "rules/a/.read, column 6: getPriority() is not supported"),
            Refusal(rules: #"{"rules":{"a":{".read":"data.child()"}}}"#, expected: "rules/a/.read, column 6: child() takes 1 argument, not 0"),
            Refusal(rules: #"{"rules":{"a":{".read":"'open"}}}"#, expected: "rules/a/.read, column 1: the string opened here is not closed"),
            Refusal(rules: #"{"rules":{"a":{".read":"auth != null &&"}}}"#, expected: "rules/a/.read, column 16: the expression ends where a value was expected"),
            Refusal(rules: #"{"rules":{"a":{".read":"/x/.test(auth.uid)"}}}"#, expected: "rules/a/.read, column 1: regular expressions are not supported"),
            Refusal(rules: #"{"rules":{"a":{".read":"query.orderByKey"}}}"#, expected: "rules/a/.read, column 1: query-based rules are not supported"),
            Refusal(rules: #"{"rules":{"a":{".read":"foo == 1"}}}"#, expected: "rules/a/.read, column 1: unknown variable foo"),
            Refusal(rules: #"{"rules":{"a":{".read":1}}}"#, expected: "rules/a/.read: expected true, false or an expression string, found a number"),
            Refusal(rules: #"{"rules":{"a":{".raed":true}}}"#, expected: "rules/a/.raed: unknown rule .raed"),
            Refusal(rules: #"{"rules":{"$a":{},"$b":{}}}"#, expected: "a second $ key at this level"),
            Refusal(rules: #"{"rules":{"a#b":{".read":true}}}"#, expected: "rules/a#b: not a valid key"),
            Refusal(rules: #"{"rules":{"a":true}}"#, expected: "rules/a: expected an object of rules and child keys, found a boolean"),
            Refusal(rules: #"{"rulez":{}}"#, expected: "rulez: unknown top-level key"),
        ])
    func refusals(_ refusal: Refusal) throws {
        do {
            _ = try Self.rules(refusal.rules)
            Issue.record("accepted: \(refusal.rules)")
        } catch let error as RulesError {
            #expect(error.description.contains(refusal.expected), "\(error)")
        }
    }

    @Test(".write, .validate and .indexOn are accepted and ignored")
    func ignored() throws {
        let rules = try Self.rules(#"{"rules":{".write":"nonsense(","a":{".validate":false,".indexOn":["x"],".read":true}}}"#)
        #expect(rules.evaluate(path: try Path("/a"), auth: nil, tree: DataTree(), now: 0).allowed)
    }

    @Test("an unknown rule or a repeated $ name of thousands of bytes is named in a cut excerpt, never whole (found by the rules fuzzer, issue 33)")
    func longNamesCut() throws {
        let long = String(repeating: "x", count: 1_500)
        for rules in [#"{"rules":{".\#(long)":true}}"#, #"{"rules":{"$\#(long)":{"a":{"$\#(long)":{".read":true}}}}}"#] {
            do {
                _ = try Self.rules(rules)
                Issue.record("accepted")
            } catch {
                let message = "\(error)"
                #expect(message.utf8.count < 1_000 && message.contains("(1501 bytes)"), "\(message.utf8.count) bytes: \(message.prefix(200))")
            }
        }
    }

    @Test("a refusal deep in rules with long keys names its place in a few hundred bytes, its start and its end")
    func longLocation() throws {
        let key = String(repeating: "k", count: 700) + "é"
        var rules = #"{".read":"matches(1)"}"#
        for _ in 0..<60 { rules = "{\"\(key)\":\(rules)}" }
        do {
            _ = try Self.rules(#"{"rules":\#(rules)}"#)
            Issue.record("accepted")
        } catch {
            let text = String(describing: error)
            #expect(text.utf8.count < 400, "\(text.utf8.count) bytes")
            #expect(text.hasPrefix("rules/kkkk"))
            #expect(text.contains("é/.read"))
            #expect(text.contains("bytes)…"))
        }
    }

    /// `json` with the text of each `.read` expression damaged (bytes flipped, cut, spliced).
    static func damagingExpressions(_ json: JSON, _ mutator: inout Mutator) -> JSON {
        guard case .object(let object) = json else { return json }
        var members: [(Key, JSON)] = []
        for (key, value) in object {
            if key.string == ".read", case .string(let text) = value {
                members.append((key, .string(String(decoding: mutator.mutateBytes(Array(text.utf8)), as: UTF8.self))))
            } else {
                members.append((key, damagingExpressions(value, &mutator)))
            }
        }
        return .object(JSONObject(members))
    }

    @Test("hostile rules (seeded mutations of valid ones) load or are refused, and evaluate in bounded time without crashing")
    func hostile() throws {
        let seeds = Self.cases.map(\.rules) + [
            #"{"rules":{".read":"\#(String(repeating: "(", count: 200))true\#(String(repeating: ")", count: 200))"}}"#,
            #"{"rules":{".read":"\#(String(repeating: "!", count: 500))true"}}"#,
            #"{"rules":{".read":"'\#(String(repeating: "a", count: 5_000))' == ''"}}"#,
        ]
        let tree = try Self.tree(Self.roomData)
        let auth = ReadRules.auth(uid: "alice", claims: ["email": "a@b.c"])
        var mutator = Mutator(seed: 21)
        var loaded = 0
        var refused = 0
        for round in 0..<3_000 {
            let original = try JSONParser.parse(Array(seeds[round % seeds.count].utf8))
            // The expressions' text damaged, or the document's structure.
            let document = round % 3 == 0 ? mutator.mutateJSON(original) : Self.damagingExpressions(original, &mutator)
            do {
                let rules = try ReadRules.parse(document)
                loaded += 1
                for path in ["/", "/rooms/r1", "/users/alice/x", "/a/b/c"] {
                    _ = rules.evaluate(path: try Path(path), auth: auth, tree: tree, now: Self.now)
                }
            } catch {
                refused += 1
                #expect(!String(describing: error).isEmpty)
            }
        }
        #expect(loaded > 100 && refused > 100)
        // Nesting and length have their limits, and say so.
        for text in [String(repeating: "(", count: 100) + "1" + String(repeating: ")", count: 100), String(repeating: "a", count: 5_000)] {
            #expect(throws: RulesError.self) { try ReadRules.parse(["rules": [".read": .string(text)]]) }
        }
        // Exponential strings stop at the bound: the rule is false.
        let doubling = "'ab'" + String(repeating: ".replace('a', 'aa')", count: 10) + ".length > 0"
        let bounded = try ReadRules.parse(["rules": [".read": .string(doubling)]])
        #expect(bounded.evaluate(path: .root, auth: auth, tree: tree, now: 0).allowed)
        let growing = "'a'" + String(repeating: ".replace('a', 'aaaaaaaaaaaaaaaa')", count: 20) + ".length > 0"
        let exploding = try ReadRules.parse(["rules": [".read": .string(growing)]])
        #expect(!exploding.evaluate(path: .root, auth: auth, tree: tree, now: 0).allowed)
    }
}
