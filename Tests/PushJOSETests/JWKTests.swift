import Testing
import PushCore
import PushJSON
@testable import PushJOSE

@Suite("JWK and key rings")
struct JWKTests {
    @Test("bad keys are refused with the reason", arguments: [
        (#"{"kty":"EC","crv":"P-384","x":"AA","y":"AA"}"#, "curve \"P-384\" is not supported"),
        (#"{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}"#, "32 bytes"),
        (#"{"crv":"P-256"}"#, "missing \"kty\""),
        (#"{"kty":"XYZ"}"#, "kty \"XYZ\" is not supported"),
        (#"{"kty":"oct","k":"a+b"}"#, "not base64url"),
        (#"{"kty":"oct"}"#, "missing \"k\""),
        (#"{"kty":"oct","k":"AAAA","use":"wrap"}"#, "expected \"sig\" or \"enc\""),
        (#"{"kty":"OKP","crv":"X25519","x":"AA"}"#, "curve \"X25519\" is not supported"),
        (#"{"kty":"RSA","n":"AQAB","e":"AQAB"}"#, "is not an RSA public key"),
    ])
    func invalid(text: String, message: String) {
        #expect {
            try JWK(json: try JSONParser.parse(text))
        } throws: { error in
            String(describing: error).contains(message)
        }
    }

    @Test("a private part must match its public part")
    func mismatchedPrivateKey() throws {
        let a = try Fixtures.key("sig-es").privateJSON.objectValue!
        let b = ServiceKey.generate().privateJSON.objectValue!
        let mixed = a.setting(Key("d"), to: b[Key("d")]!)
        #expect(throws: JOSEError.invalidKey("JWK \"sig-es\": d does not match x, y")) { try JWK(json: .object(mixed)) }
    }

    @Test("keys survive writing and reading back, private or public")
    func roundTrip() throws {
        for key in try Fixtures.keyRing().keys {
            let again = try JWK(json: key.privateJSON)
            #expect(again.thumbprint == key.thumbprint)
            #expect(again.kid == key.kid && again.use == key.use && again.alg == key.alg)
            #expect(again.isPrivate == key.isPrivate)
            if let publicJSON = key.publicJSON {
                #expect(try JWK(json: publicJSON).isPrivate == false)
                #expect(publicJSON["d"] == nil)
            }
        }
    }

    @Test("the ring finds keys by kid and use, and refuses duplicate kids")
    func ring() throws {
        let ring = try Fixtures.keyRing()
        #expect(ring.key(kid: "sig-es", use: .signature) != nil)
        #expect(ring.key(kid: "sig-es", use: .encryption) == nil)
        #expect(ring.key(kid: "enc-dir", use: .encryption) != nil)
        #expect(ring.signingKeys.compactMap(\.kid) == ["sig-es", "sig-hs", "sig-ed"])
        #expect(throws: JOSEError.self) { try KeyRing([try Fixtures.key("enc-dir"), try Fixtures.key("enc-kw").with(kid: "enc-dir")]) }
        #expect(throws: JOSEError.self) { try KeyRing(jwkSet: ["keys": "nope"]) }
    }
}
