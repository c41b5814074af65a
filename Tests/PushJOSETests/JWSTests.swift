import Testing
import PushCore
import PushJSON
@testable import PushJOSE

@Suite("JWS")
struct JWSTests {
    let payload = bytes(#"{"t":"v","m":"noData","a":"toto","p":"/p"}"#)

    @Test("each algorithm signs and verifies, header alg then kid", arguments: [("sig-es", "ES256"), ("sig-hs", "HS256"), ("sig-ed", "EdDSA")])
    func roundTrip(kid: String, alg: String) throws {
        let ring = try Fixtures.keyRing()
        let signer = try JWSSigner(key: try Fixtures.key(kid))
        let token = try signer.sign(payload)
        #expect(token.count == signer.compactLength(payloadLength: payload.count))
        let header = Base64URL.decode(token.split(separator: UInt8(ascii: "."))[0])!
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"\#(alg)","kid":"\#(kid)"}"#)
        let verified = try JWS.verify(token, keys: ring)
        #expect(verified.payload == payload)
        #expect(verified.algorithm.rawValue == alg)
    }

    /// Replaces part `index` of a compact token.
    func replacing(_ token: [UInt8], part index: Int, with text: String) -> [UInt8] {
        var parts = token.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map(Array.init)
        parts[index] = bytes(text)
        return Array(parts.joined(separator: [UInt8(ascii: ".")]))
    }

    func header(_ json: String) -> String { Base64URL.encodeToString(bytes(json)) }

    @Test("failures are named")
    func failures() throws {
        let ring = try Fixtures.keyRing()
        let token = try JWSSigner(key: try Fixtures.key("sig-es")).sign(payload)
        func code(_ token: [UInt8]) -> JOSEError.Code? {
            do {
                _ = try JWS.verify(token, keys: ring)
                return nil
            } catch {
                return error.code
            }
        }
        // A tampered payload or signature.
        #expect(code(replacing(token, part: 1, with: Base64URL.encodeToString(bytes("{}")))) == .badSignature)
        var flipped = token
        flipped[flipped.count - 5] = flipped[flipped.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(code(flipped) == .badSignature)
        // Signed with another key under the same kid.
        let other = try JWSSigner(key: ServiceKey.generate().with(kid: "sig-es")).sign(payload)
        #expect(code(other) == .badSignature)
        // Unknown kid; no kid.
        #expect(code(replacing(token, part: 0, with: header(#"{"alg":"ES256","kid":"nope"}"#))) == .unknownKeyID("nope"))
        if case .malformedToken = code(replacing(token, part: 0, with: header(#"{"alg":"ES256"}"#))) {} else { Issue.record("no kid") }
        // alg none, an unknown algorithm, and an algorithm that does not fit the key.
        #expect(code(replacing(token, part: 0, with: header(#"{"alg":"none","kid":"sig-es"}"#))) == .unsupportedAlgorithm("none"))
        #expect(code(replacing(token, part: 0, with: header(#"{"alg":"PS256","kid":"sig-es"}"#))) == .unsupportedAlgorithm("PS256"))
        if case .keyMismatch = code(replacing(token, part: 0, with: header(#"{"alg":"RS256","kid":"sig-es"}"#))) {} else {
            Issue.record("RS256 with an EC key must be refused")
        }
        if case .keyMismatch = code(replacing(token, part: 0, with: header(#"{"alg":"HS256","kid":"sig-es"}"#))) {} else {
            Issue.record("HS256 with an EC key must be refused")
        }
        // Malformed tokens.
        for broken in ["a.b", "a.b.c.d", "!!!.e30.AA", "\(header("[1]")).e30.AA", "\(header(#"{"alg":"ES256","kid":"sig-es","crit":["exp"]}"#)).e30.AA"] {
            if case .malformedToken = code(bytes(broken)) {} else { Issue.record("\(broken) must be malformed") }
        }
    }

    @Test("keys that do not fit are refused when signing")
    func signingKeyChecks() throws {
        #expect(throws: JOSEError.self) { try JWSSigner(key: try Fixtures.key("enc-dir")) }  // use enc
        #expect(throws: JOSEError.self) { try JWSSigner(key: try Fixtures.key("sig-es"), algorithm: .hs256) }
        let short = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString([UInt8](repeating: 7, count: 16)))])
        #expect(throws: JOSEError.self) { try JWSSigner(key: short) }  // HS256 needs 256 bits
        var publicOnly = try Fixtures.key("sig-es").publicJSON!
        publicOnly = .object(publicOnly.objectValue!.removing(Key("use")))
        #expect(throws: JOSEError.self) { try JWSSigner(key: try JWK(json: publicOnly)) }  // no d
    }
}
