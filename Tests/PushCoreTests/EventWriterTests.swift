import Testing
@testable import PushCore
import PushJSON

@Suite("v2 event objects (SPEC §7.3)")
struct EventWriterTests {
    @Test("fields come in the order t m a p s v/c r", arguments: [
        (Event.Body.noData, PayloadStatus.ok, #"{"t":"v","m":"noData","a":"toto","p":"/p"}"#),
        (.revoke(.expired), .ok, #"{"t":"r","a":"toto","p":"/p","r":"expired"}"#),
        (.value(["b": 1, "a": [true]]), .ok, #"{"t":"v","m":"value","a":"toto","p":"/p","s":"OK","v":{"a":[true],"b":1}}"#),
        (.value(nil), .ok, #"{"t":"v","m":"value","a":"toto","p":"/p","s":"OK","v":null}"#),
        (.value(["b": 1]), .tooBig, #"{"t":"v","m":"value","a":"toto","p":"/p","s":"TooBig"}"#),
        (.childEvent(ChildDiff(added: [(Key("x"), .int(1))], removed: [Key("y")], changed: [(Key("z"), "s")])), .ok,
         #"{"t":"v","m":"childEvent","a":"toto","p":"/p","s":"OK","c":{"a":{"x":1},"r":["y"],"c":{"z":"s"}}}"#),
        (.childEvent(ChildDiff(added: [(Key("x"), .int(1))], removed: [Key("y")], changed: [(Key("z"), "s")])), .onlyKeys,
         #"{"t":"v","m":"childEvent","a":"toto","p":"/p","s":"OnlyKeys","c":{"a":{"x":true},"r":["y"],"c":{"z":true}}}"#),
        (.childEvent(ChildDiff(added: [(Key("x"), .int(1))], removed: [Key("y")])), .tooBig,
         #"{"t":"v","m":"childEvent","a":"toto","p":"/p","s":"TooBig","c":{"a":{},"r":[],"c":{}}}"#),
    ])
    func fieldOrder(body: Event.Body, status: PayloadStatus, expected: String) {
        var writer = JSONWriter()
        EventWriter.write(Event(app: "toto", path: "/p", body: body), status: status, into: &writer)
        #expect(writer.string == expected)
    }
}
