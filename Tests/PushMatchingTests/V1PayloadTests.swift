@testable import PushCore
import PushJSON
import PushMatching
import Testing

@Suite("v1 payloads (SPEC §7.2, §7.4)")
struct V1PayloadTests {
    func build(_ event: Event) -> (String, PayloadStatus?) {
        let builder = V1PayloadBuilder()
        let (bytes, status) = builder.build(event)
        return (String(decoding: bytes, as: UTF8.self), status)
    }

    func value(_ text: String) -> JSON? { try! JSONParser.parse(text).treeNormalized(at: .root) }

    @Test("SPEC's 114-byte example, byte for byte")
    func specExample() {
        let (payload, status) = build(Event(app: "toto", path: "/some/webcom/path", body: .value(value(#"{"a":"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj"}"#))))
        #expect(payload == #"{"s":"OK","t":"value","app":"toto","sp":"/some/webcom/path","d":"{\"a\":\"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj\"}"}"#)
        #expect(payload.utf8.count == 114)
        #expect(status == .ok)
    }

    @Test("each mode has its fixed field order", arguments: [
        (Event.Body.noData, #"{"t":"noData","app":"toto","sp":"/p"}"#),
        (.revoke(.expired), #"{"t":"revoke","r":"expired","app":"toto","sp":"/p"}"#),
        (.revoke(.permissionDenied), #"{"t":"revoke","r":"permission_denied","app":"toto","sp":"/p"}"#),
        (.value(nil), #"{"s":"OK","t":"value","app":"toto","sp":"/p","d":"null"}"#),
        (.value(.string("a\"b\\c\n")), #"{"s":"OK","t":"value","app":"toto","sp":"/p","d":"\"a\\\"b\\\\c\\n\""}"#),
        (.childEvent(ChildDiff()), #"{"s":"OK","t":"childEvent","app":"toto","sp":"/p","added":"{}","removed":"[]","changed":"{}"}"#),
        (.childEvent(ChildDiff(added: [(Key("b"), .int(1))], removed: [Key("9"), Key("x")], changed: [(Key("c"), JSON(dictionaryLiteral: ("k", .bool(true))))])),
         #"{"s":"OK","t":"childEvent","app":"toto","sp":"/p","added":"{\"b\":1}","removed":"[\"9\",\"x\"]","changed":"{\"c\":{\"k\":true}}"}"#),
    ])
    func modes(body: Event.Body, expected: String) {
        #expect(build(Event(app: "toto", path: "/p", body: body)).0 == expected)
    }

    @Test("values keep key order, arrays become objects, escapes are doubled")
    func valueContent() {
        let (payload, _) = build(Event(app: "app_é", path: "/p", body: .value(value(
            #"{"10":1,"9":2,"-1":3,"a":4,"B":5,"01":6,"2147483648":7,"é":8,"l":[1,null,2],"e":{},"u":"\u0001\u007f😀"}"#))))
        #expect(payload == #"{"s":"OK","t":"value","app":"app_é","sp":"/p","d":"{\"-1\":3,\"9\":2,\"10\":1,\"01\":6,\"2147483648\":7,\"B\":5,\"a\":4,\"l\":{\"0\":1,\"2\":2},\"u\":\"\\u0001\#u{7F}😀\",\"é\":8}"}"#)
    }

    // MARK: - Size rule at its boundary

    static let valuePrefix = #"{"s":"OK","t":"value","app":"toto","sp":"/b","d":"{\"a\":\""#
    static let valueSuffix = #"\"}"}"#

    @Test("value payloads of 4062 and 4063 bytes are sent; 4064 and 4065 are TooBig", arguments: [4062, 4063, 4064, 4065])
    func valueBoundary(length: Int) {
        let padding = length - Self.valuePrefix.utf8.count - Self.valueSuffix.utf8.count
        let full = Self.valuePrefix + String(repeating: "x", count: padding) + Self.valueSuffix
        #expect(full.utf8.count == length)
        let (payload, status) = build(Event(app: "toto", path: "/b", body: .value(["a": .string(String(repeating: "x", count: padding))])))
        if length < 4064 {
            #expect(payload == full)
            #expect(status == .ok)
        } else {
            #expect(payload == #"{"s":"TooBig","t":"value","app":"toto","sp":"/b"}"#)
            #expect(status == .tooBig)
        }
    }

    /// The childEvent payload, written out by hand: the test's own oracle.
    static func childPayload(_ status: String, _ added: [(String, String)]) -> String {
        let members = added.map { #"\"\#($0.0)\":\#($0.1)"# }.joined(separator: ",")
        return #"{"s":"\#(status)","t":"childEvent","app":"toto","sp":"/o","added":"{\#(members)}","removed":"[\"gone\"]","changed":"{}"}"#
    }

    /// 110 children with 20-byte string values, the last key padded so that the OnlyKeys form
    /// is exactly `onlyKeysLength` bytes.
    static func children(onlyKeysLength: Int) -> [(String, String)] {
        var keys = (0..<110).map { "key-\(String(1000 + $0))-kkkkkkkkkkkkkkkk" }
        let base = childPayload("OnlyKeys", keys.map { ($0, "true") }).utf8.count
        keys[keys.count - 1] += String(repeating: "q", count: onlyKeysLength - base)
        return keys.map { ($0, #"\"vvvvvvvvvvvvvvvvvvvv\""#) }
    }

    @Test("childEvent: OnlyKeys below 4064 bytes of keys, TooBig from 4064", arguments: [4062, 4063, 4064, 4065])
    func onlyKeysBoundary(onlyKeysLength: Int) {
        let added = Self.children(onlyKeysLength: onlyKeysLength)
        let onlyKeys = Self.childPayload("OnlyKeys", added.map { ($0.0, "true") })
        #expect(onlyKeys.utf8.count == onlyKeysLength)
        let diff = ChildDiff(
            added: added.map { (Key($0.0), JSON.string("vvvvvvvvvvvvvvvvvvvv")) },
            removed: [Key("gone")])
        let (payload, status) = build(Event(app: "toto", path: "/o", body: .childEvent(diff)))
        if onlyKeysLength < 4064 {
            #expect(payload == onlyKeys)
            #expect(status == .onlyKeys)
        } else {
            #expect(payload == #"{"s":"TooBig","t":"childEvent","app":"toto","sp":"/o","added":"{}","removed":"[]","changed":"{}"}"#)
            #expect(status == .tooBig)
        }
    }

    @Test("childEvent payloads of 4063 bytes are sent whole; from 4064 they degrade", arguments: [4063, 4064])
    func childEventBoundary(length: Int) {
        let base = Self.childPayload("OK", [("k", #"\"\""#)]).utf8.count
        let padding = String(repeating: "x", count: length - base)
        let full = Self.childPayload("OK", [("k", #"\"\#(padding)\""#)])
        #expect(full.utf8.count == length)
        let diff = ChildDiff(added: [(Key("k"), .string(padding))], removed: [Key("gone")])
        let (payload, status) = build(Event(app: "toto", path: "/o", body: .childEvent(diff)))
        if length < 4064 {
            #expect(payload == full)
            #expect(status == .ok)
        } else {
            #expect(payload == Self.childPayload("OnlyKeys", [("k", "true")]))
            #expect(status == .onlyKeys)
        }
    }
}
