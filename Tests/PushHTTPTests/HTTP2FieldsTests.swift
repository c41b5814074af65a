import NIOCore
import NIOHPACK
import NIOHTTP2
@testable import PushHTTP
import PushTestSupport
import Testing

/// The header fields this client checks itself, swift-nio-http2's validation being off on its
/// connections (``HTTP2Fields``): answers read, requests written.
@Suite("HTTP/2 header fields: what an answer and a request may carry")
struct HTTP2FieldsTests {
    static func block(_ fields: [(String, String)]) -> HPACKHeaders {
        var headers = HPACKHeaders()
        for (name, value) in fields { headers.add(name: name, value: value) }
        return headers
    }

    static let valid: [(String, String)] = [
        (":status", "200"), ("content-type", "application/json; charset=UTF-8"), ("retry-after", "30"), ("x-a_b.c~d|e'f", "\t a \u{7F} é "),
    ]

    @Test("a well-formed answer, informational or final, and trailers: no fault")
    func wellFormed() {
        #expect(HTTP2Fields.fault(inAnswer: Self.block(Self.valid), trailers: false) == nil)
        #expect(HTTP2Fields.fault(inAnswer: Self.block([(":status", "103"), ("link", "</a>; rel=preload")]), trailers: false) == nil)
        #expect(HTTP2Fields.fault(inAnswer: Self.block([("grpc-status", "0")]), trailers: true) == nil)
        #expect(HTTP2Fields.fault(inAnswer: Self.block([]), trailers: true) == nil)
    }

    @Test(
        "a malformed answer names its fault, never a value",
        arguments: [
            ([(":status", "200"), ("Content-Type", "x")], false, "an invalid field name"),
            ([(":status", "200"), ("", "x")], false, "an invalid field name"),
            ([(":status", "200"), ("a b", "x")], false, "an invalid field name"),
            ([(":status", "200"), ("x-secret", "a\r\nset-cookie: b")], false, "the field x-secret holds NUL, CR or LF"),
            ([(":status", "200"), ("x-secret", "a\nb")], false, "the field x-secret holds NUL, CR or LF"),
            ([(":status", "200"), ("x-secret", "a\u{0}b")], false, "the field x-secret holds NUL, CR or LF"),
            ([(":status", "200"), ("connection", "close")], false, "the connection-specific field connection"),
            ([(":status", "200"), ("transfer-encoding", "chunked")], false, "the connection-specific field transfer-encoding"),
            ([(":status", "200"), ("keep-alive", "5")], false, "the connection-specific field keep-alive"),
            ([(":status", "200"), ("upgrade", "h2c")], false, "the connection-specific field upgrade"),
            ([(":status", "200"), ("proxy-connection", "x")], false, "the connection-specific field proxy-connection"),
            ([("content-type", "x"), (":status", "200")], false, "a pseudo-header field after a regular one"),
            ([(":status", "200"), (":status", "204")], false, "two :status fields"),
            ([(":status", "200"), (":path", "/")], false, "the pseudo-header field :path, which an answer cannot carry"),
            ([(":status", "200"), (":Bad", "/")], false, "an invalid field name"),
            ([(":status", "2 0")], false, "a :status that is no valid value"),
            ([("content-type", "x")], false, "no :status"),
            ([], false, "no :status"),
            ([(":status", "200")], true, "a pseudo-header field in trailers"),
        ] as [([(String, String)], Bool, String)])
    func malformed(fields: [(String, String)], trailers: Bool, fault: String) {
        #expect(HTTP2Fields.fault(inAnswer: Self.block(fields), trailers: trailers) == fault)
    }

    @Test("a request's fields: lowercase tokens, no NUL, CR or LF, nothing connection-specific, te only as trailers")
    func requestFields() {
        #expect(HTTP2Fields.fault(name: "authorization", value: "Bearer ya29.a0_b-c~d+e/f==") == nil)
        #expect(HTTP2Fields.fault(name: "ttl", value: "") == nil)
        #expect(HTTP2Fields.fault(name: "authorization", value: "Bearer a\r\nb") == "the field authorization holds NUL, CR or LF")
        #expect(HTTP2Fields.fault(name: "x:y", value: "1") == "an invalid field name")
        #expect(HTTP2Fields.fault(name: "upgrade", value: "h2c") == "the connection-specific field upgrade")
        #expect(HTTP2Fields.fault(requestField: "te", value: "trailers") == nil)
        #expect(HTTP2Fields.fault(requestField: "te", value: "gzip") == "te other than trailers")
        #expect(HTTP2Fields.fault(requestField: "authorization", value: "a\nb") == "the field authorization holds NUL, CR or LF")
    }

    /// The rules written out the slow way, as RFC 9113 §8.2 says them: the model the checks
    /// are compared with on mutated blocks.
    static func modelFault(_ fields: [(String, String)], trailers: Bool) -> Bool {
        let tchar = Set(Array("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz".utf8))
        func token(_ name: Substring) -> Bool { !name.isEmpty && name.utf8.allSatisfy(tchar.contains) }
        var seenRegular = false
        var statuses = 0
        for (name, value) in fields {
            if name.hasPrefix(":") {
                if trailers || seenRegular || name != ":status" { return true }
                if value.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) { return true }
                statuses += 1
                if statuses > 1 { return true }
            } else {
                seenRegular = true
                if !token(Substring(name)) { return true }
                if ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"].contains(name) { return true }
                if value.utf8.contains(where: { $0 == 0 || $0 == 0x0A || $0 == 0x0D }) { return true }
            }
        }
        return !trailers && statuses == 0
    }

    @Test("mutated answers (seeded, bounded): no crash, and a fault exactly when the rules see one")
    func mutatedAnswers() {
        var random = SeededRandom(seed: 0x4854_5450_3246)
        let alphabet: [UInt8] = Array(":status200abcAZ-_ \t\r\n\u{0}\u{7F}é,;=\"".utf8)
        let names = [":status", "content-type", "retry-after", "connection", "upgrade", ":path", "apns-id", "te"]
        for _ in 0..<3_000 {
            var fields = Self.valid
            for _ in 0..<random.below(4) {
                let index = random.below(fields.count)
                switch random.below(6) {
                case 0: fields[index].0 = random.pick(names)
                case 1: fields.swapAt(index, random.below(fields.count))
                case 2: fields.remove(at: index)
                case 3: fields.append((random.pick(names), "1"))
                default:
                    // One byte of a name or a value replaced (kept valid UTF-8 by decoding).
                    let inName = random.chance(50)
                    var bytes = Array((inName ? fields[index].0 : fields[index].1).utf8)
                    // HPACKHeaders.add takes ASCII names only (what the decoder reads may hold
                    // any byte: the checks refuse a name that is no token, which covers it).
                    let byte = random.pick(inName ? alphabet.filter { $0 < 0x80 } : alphabet)
                    if bytes.isEmpty { bytes = [byte] } else { bytes[random.below(bytes.count)] = byte }
                    let text = String(decoding: bytes, as: UTF8.self)
                    if inName { fields[index].0 = text } else { fields[index].1 = text }
                }
                if fields.isEmpty { break }
            }
            let trailers = random.chance(20)
            let fault = HTTP2Fields.fault(inAnswer: Self.block(fields), trailers: trailers)
            #expect((fault != nil) == Self.modelFault(fields, trailers: trailers), "\(fields) trailers: \(trailers) → \(fault ?? "none")")
            if let fault { #expect(!fault.contains("\r") && !fault.contains("\n") && !fault.contains("\u{0}")) }
        }
    }
}
