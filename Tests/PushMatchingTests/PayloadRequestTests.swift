@testable import PushCore
import PushJSON
@testable import PushMatching
import Testing

@Suite("pushdispatch payload requests (SPEC §7.5)")
struct PayloadRequestTests {
    func run(_ line: String) -> (String, Bool) {
        var processor = PayloadLineProcessor()
        var out = JSONWriter()
        var copy = line
        let ok = copy.withUTF8 { processor.process(line: $0, into: &out) }
        return (out.string, ok)
    }

    @Test("good requests give payloads", arguments: [
        (#"{"app":"toto","path":"/some/webcom/path","format":"v1"}"#, #"{"t":"noData","app":"toto","sp":"/some/webcom/path"}"#),
        (#"{"app":"toto","path":"a//b/./c/..","mode":null,"format":"v1"}"#, #"{"t":"noData","app":"toto","sp":"/a/b"}"#),
        (#"{"app":"toto","path":"/p","mode":"value","format":"v1","before":1,"after":1}"#, #"{"s":"OK","t":"value","app":"toto","sp":"/p","d":"1"}"#),
        (#"{"app":"toto","path":"/p","mode":"value","format":"v1","after":{"e":{},"n":null,"l":[]}}"#, #"{"s":"OK","t":"value","app":"toto","sp":"/p","d":"null"}"#),
        (#"{"app":"toto","path":"/p","mode":"childEvent","format":"v1","before":5,"after":{"a":1}}"#, #"{"s":"OK","t":"childEvent","app":"toto","sp":"/p","added":"{\"a\":1}","removed":"[]","changed":"{}"}"#),
        (#"{"app":"toto","path":"/p","format":"v1","revoke":"too_big"}"#, #"{"t":"revoke","r":"too_big","app":"toto","sp":"/p"}"#),
    ])
    func good(line: String, expected: String) {
        let (output, ok) = run(line)
        #expect(ok)
        #expect(output == expected)
    }

    @Test("bad requests give an error line that says what and where", arguments: [
        ("", "invalid JSON at byte 0: empty input"),
        ("{\"app\":", "invalid JSON at byte 7"),
        ("[1]", "request: expected a JSON object, got an array"),
        (#"{"path":"/p","format":"v1"}"#, "app: missing; expected a string"),
        (#"{"app":7,"path":"/p","format":"v1"}"#, "app: expected a string, got a number"),
        (#"{"app":"","path":"/p","format":"v1"}"#, "app: an application id may not be empty"),
        (#"{"app":"a/b","path":"/p","format":"v1"}"#, "contains '/'"),
        (#"{"app":"toto","format":"v1"}"#, "path: missing"),
        (#"{"app":"toto","path":"/a.b","format":"v1"}"#, #"path "/a.b": key "a.b" contains '.'"#),
        (#"{"app":"toto","path":"/p","format":"v3"}"#, #"format: expected one of "v1", "v2", got "v3""#),
        (#"{"app":"toto","path":"/p","format":"v1","mode":"values"}"#, #"mode: expected one of "noData", "value", "childEvent", got "values""#),
        (#"{"app":"toto","path":"/p","format":"v1","revoke":"nope"}"#, "revoke: expected one of"),
        (#"{"app":"toto","path":"/p","format":"v1","revoke":"expired","mode":"value"}"#, "a revoke request carries no mode"),
        (#"{"app":"toto","path":"/p","format":"v1","mdoe":"value"}"#, #"unknown field "mdoe""#),
        (#"{"app":"toto","path":"/p","format":"v1","after":{"a$":1}}"#, #"after: data at /p: key "a$" contains '$'"#),
        (#"{"app":"toto","path":"/p","format":"v1","signing":"k"}"#, "signing: only v2 payloads are signed"),
        (#"{"app":"toto","path":"/p","format":"v2"}"#, "format v2 needs JOSE signing keys"),
    ])
    func bad(line: String, message: String) {
        let (output, ok) = run(line)
        #expect(!ok)
        #expect(output.hasPrefix(#"{"error":""#))
        let error = (try? JSONParser.parse(output))?["error"]?.stringValue ?? ""
        #expect(error.contains(message), "got: \(error)")
    }
}
