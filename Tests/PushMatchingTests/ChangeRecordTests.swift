@testable import PushCore
import PushJSON
@testable import PushMatching
import PushTestSupport
import Testing

@Suite("Change records (SPEC §4, §11.2)")
struct ChangeRecordTests {
    func reason(_ line: String) -> String? {
        do {
            _ = try ChangeRecord.parse(Array(line.utf8))
            return nil
        } catch {
            return error.reason
        }
    }

    @Test("valid records of every kind", arguments: [
        #"{"seq":1,"app":"toto","op":"put","path":"/","data":{"users":{"alice":{"name":"Alice"}}}}"#,
        #"{"seq":2,"app":"toto","op":"patch","path":"/users","data":{"bob/name":"Bob","alice":null}}"#,
        #"{"seq":3,"app":"toto","op":"revoke","path":"/users/bob","uid":"u42","reason":"permission_denied"}"#,
        #"{"seq":4,"app":"toto","op":"revoke","reason":"disabled"}"#,
        #"{"seq":5,"app":"toto","op":"put","path":"/x","data":null,"ts":1700000000000,"extra":"ignored"}"#,
        #"{"seq":6,"app":"toto","op":"patch","path":"/x","data":{}}"#,
        #"{"seq":-7,"app":"a b","op":"put","path":"a//b/./c/..","data":[1,null]}"#,
    ])
    func valid(line: String) {
        #expect(reason(line) == nil)
    }

    @Test("each bad input is refused with what, where and what was expected", arguments: [
        ("", "invalid JSON at byte 0"),
        (#"{"seq":1,"app":"toto",op:put}"#, "invalid JSON at byte 22"),
        (#"{"seq":1,"app":"toto","op":"put","path":"/x","da"#, "invalid JSON at byte"),
        (#"[1,"toto","put"]"#, "a change record is a JSON object, got an array"),
        (#"{"app":"toto","op":"put","path":"/x","data":1}"#, "seq: missing; expected an integer"),
        (#"{"seq":"1","app":"toto","op":"put","path":"/x","data":1}"#, "seq: expected an integer, got \"1\""),
        (#"{"seq":1.5,"app":"toto","op":"put","path":"/x","data":1}"#, "seq: expected an integer (an integer of at most 64 bits"),
        (#"{"seq":99999999999999999999,"app":"toto","op":"put","path":"/x","data":1}"#, "seq: expected an integer"),
        (#"{"seq":1,"op":"put","path":"/x","data":1}"#, "app: missing"),
        (#"{"seq":1,"app":"","op":"put","path":"/x","data":1}"#, "app: an application id may not be empty"),
        (#"{"seq":1,"app":"a/b","op":"put","path":"/x","data":1}"#, "contains '/'"),
        (#"{"seq":1,"app":"toto","path":"/x","data":1}"#, "op: missing"),
        (#"{"seq":1,"app":"toto","op":"delete","path":"/x","data":1}"#, "op: expected \"put\", \"patch\" or \"revoke\", got \"delete\""),
        (#"{"seq":1,"app":"toto","op":"put","data":1}"#, "path: missing"),
        (#"{"seq":1,"app":"toto","op":"put","path":"/x/a.b","data":1}"#, "key \"a.b\" contains '.'"),
        (#"{"seq":1,"app":"toto","op":"put","path":"/x/a\u0001b","data":1}"#, "control character U+0001"),
        (#"{"seq":1,"app":"toto","op":"put","path":"/x"}"#, "data: missing; a put carries the new value (null deletes)"),
        (#"{"seq":1,"app":"toto","op":"put","path":"/x","data":{"ok":1,"deep":{"a$":2}}}"#, "data at /x/deep: key \"a$\" contains '$'"),
        (#"{"seq":1,"app":"toto","op":"put","path":"/x","data":{"":1}}"#, "a key is empty"),
        (#"{"seq":1,"app":"toto","op":"put","path":"/x","data":{"s":"a\ud800b"}}"#, "invalid JSON"),
        (#"{"seq":1,"app":"toto","op":"put","path":"/x","data":NaN}"#, "invalid JSON"),
        (#"{"seq":1,"app":"toto","op":"put","path":"/x","data":1e400}"#, "invalid JSON"),
        (#"{"seq":1,"app":"toto","op":"patch","path":"/x","data":5}"#, "patch data must be an object"),
        (#"{"seq":1,"app":"toto","op":"patch","path":"/x","data":{"a/b$c":1}}"#, "patch key \"a/b$c\""),
        (#"{"seq":1,"app":"toto","op":"patch","path":"/x","data":{"a//b":1}}"#, "has an empty segment"),
        (#"{"seq":1,"app":"toto","op":"patch","path":"/x","data":{"a":1,"a/b":2}}"#, "overlap"),
        (#"{"seq":1,"app":"toto","op":"revoke"}"#, "reason: a revoke record gives one of"),
        (#"{"seq":1,"app":"toto","op":"revoke","reason":"expired"}"#, "reason: a revoke record gives one of"),
        (#"{"seq":1,"app":"toto","op":"revoke","reason":"disabled","uid":7}"#, "uid: expected a string"),
        (#"{"seq":1,"app":"toto","op":"revoke","reason":"disabled","path":"/a.b"}"#, "contains '.'"),
        (#"{"seq":1,"app":"toto","op":"put","path":"/x","data":1,"ts":"now"}"#, "ts: expected milliseconds"),
    ])
    func invalid(line: String, message: String) {
        let reason = reason(line)
        #expect(reason?.contains(message) == true, "got: \(String(describing: reason))")
    }

    @Test("a path of more than 2048 bytes and a key of more than 768 are refused")
    func limits() {
        let long = "/" + Array(repeating: String(repeating: "k", count: 127), count: 16).joined(separator: "/") + "/y"
        #expect(reason(#"{"seq":1,"app":"toto","op":"put","path":"\#(long)","data":1}"#)?.contains("a path is at most 2048 bytes") == true)
        let key = String(repeating: "é", count: 385)
        #expect(reason(#"{"seq":1,"app":"toto","op":"put","path":"/x/\#(key)","data":1}"#)?.contains("a key is at most 768 bytes") == true)
    }

    @Test("the seq of a refused record is kept when it could be read")
    func seqKept() {
        do {
            _ = try ChangeRecord.parse(Array(#"{"seq":42,"app":"toto","op":"nope"}"#.utf8))
        } catch {
            #expect(error.seq == 42)
        }
        do {
            _ = try ChangeRecord.parse(Array("{".utf8))
        } catch {
            #expect(error.seq == nil)
        }
    }

    @Test("damaged records are accepted or refused with a bounded reason", arguments: [1, 2, 3] as [UInt64])
    func damaged(seed: UInt64) throws {
        var mutator = Mutator(seed: seed)
        let bases = [
            #"{"seq":1,"app":"toto","op":"put","path":"/users/alice","data":{"name":"Alice","tags":[1,2]}}"#,
            #"{"seq":2,"app":"toto","op":"patch","path":"/users","data":{"bob/name":"Bob","alice":null}}"#,
            #"{"seq":3,"app":"toto","op":"revoke","path":"/users/bob","uid":"u42","reason":"permission_denied"}"#,
        ]
        for round in 0..<3_000 {
            let base = mutator.random.pick(bases)
            let line = mutator.random.chance(50)
                ? mutator.mutateBytes(Array(base.utf8)) : Array(mutator.mutateJSON(try JSONParser.parse(base)).description.utf8)
            do {
                let record = try ChangeRecord.parse(line)
                #expect(!record.app.isEmpty, "seed \(seed) round \(round)")
            } catch {
                #expect(!error.reason.isEmpty && error.reason.utf8.count <= 3000, "seed \(seed) round \(round)")
            }
        }
    }
}
