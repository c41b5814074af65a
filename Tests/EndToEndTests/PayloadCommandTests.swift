import Foundation
import Testing
import PushTestSupport
import PushJSON

@Suite("pushdispatch payload, run as a process", .processLevel)
struct PayloadCommandTests {
    @Test("one payload per request line, in order; exit status 0")
    func goodLines() throws {
        let input = """
            {"app":"toto","path":"/some/webcom/path","mode":"value","format":"v1","after":{"a":"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj"}}
            {"app":"toto","path":"/p","format":"v1","revoke":"expired"}
            {"app":"toto","path":"/p","mode":"childEvent","format":"v1","before":{"a":1},"after":{"b":2}}

            """
        let result = try Executable.run(["payload"], input: input)
        #expect(result.status == 0)
        #expect(result.lines == [
            #"{"s":"OK","t":"value","app":"toto","sp":"/some/webcom/path","d":"{\"a\":\"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj\"}"}"#,
            #"{"t":"revoke","r":"expired","app":"toto","sp":"/p"}"#,
            #"{"s":"OK","t":"childEvent","app":"toto","sp":"/p","added":"{\"b\":2}","removed":"[\"a\"]","changed":"{}"}"#,
        ])
        #expect(result.stderr.isEmpty)
    }

    @Test("a bad line gives an error line in its place, the rest go on, and the exit status says so")
    func badLines() throws {
        let input = [
            #"{"app":"toto","path":"/p","format":"v1"}"#,
            #"{"app":"toto","path":"/p","format":"v1","after":{"bad.key":1},"mode":"value"}"#,
            "not json",
            "",
            #"{"app":"toto","path":"/q","format":"v1"}"#,
        ].joined(separator: "\n") + "\n"
        let result = try Executable.run(["payload"], input: input)
        #expect(result.status == 1)
        let lines = result.lines
        #expect(lines.count == 5)
        #expect(lines[0] == #"{"t":"noData","app":"toto","sp":"/p"}"#)
        #expect(lines[1] == #"{"error":"after: data at /p: key \"bad.key\" contains '.'; keys may not contain . $ # [ ] / or control characters"}"#)
        #expect(lines[2].hasPrefix(#"{"error":"invalid JSON at byte 0: "#))
        #expect(lines[3] == #"{"error":"invalid JSON at byte 0: empty input; expected a JSON value"}"#)
        #expect(lines[4] == #"{"t":"noData","app":"toto","sp":"/q"}"#)
        #expect(result.stderr.contains("3 request lines failed"))
    }

    @Test("a last line without newline and CRLF line endings are read")
    func lineEndings() throws {
        let result = try Executable.run(
            ["payload"], input: "{\"app\":\"a\",\"path\":\"/x\",\"format\":\"v1\"}\r\n{\"app\":\"b\",\"path\":\"/y\",\"format\":\"v1\"}")
        #expect(result.status == 0)
        #expect(result.lines == [#"{"t":"noData","app":"a","sp":"/x"}"#, #"{"t":"noData","app":"b","sp":"/y"}"#])
    }

    @Test("many lines stream through in order")
    func manyLines() throws {
        let count = 20_000
        let input = (0..<count).map { #"{"app":"toto","path":"/n/\#($0)","mode":"value","format":"v1","after":\#($0)}"# }
            .joined(separator: "\n") + "\n"
        let result = try Executable.run(["payload"], input: input)
        #expect(result.status == 0)
        let lines = result.lines
        #expect(lines.count == count)
        #expect(lines[12345] == #"{"s":"OK","t":"value","app":"toto","sp":"/n/12345","d":"12345"}"#)
    }
}
