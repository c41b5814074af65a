import Crypto
import CryptoExtras
import Testing
import PushCore
import PushJSON
@testable import PushJOSE

@Suite("Bearer tokens of the REST API")
struct BearerTokenTests {
    let now: Int64 = 1_800_000_000

    func claims(_ members: [(String, JSON)]) -> [UInt8] {
        Array(JSON.object(JSONObject(members.map { (Key($0.0), $0.1) })).description.utf8)
    }

    /// An RS256 JWT signed with swift-crypto directly (our signer refuses RS256).
    func rs256Token(_ key: _RSA.Signing.PrivateKey, kid: String, claims: [UInt8]) throws -> String {
        let header = Base64URL.encodeToString(Array(#"{"alg":"RS256","kid":"\#(kid)"}"#.utf8))
        let input = header + "." + Base64URL.encodeToString(claims)
        let signature = try key.signature(for: Array(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encodeToString(signature.rawRepresentation)
    }

    @Test("tokens from a JWK Set: RS256 and ES256 by kid")
    func jwkSet() throws {
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let primitives = try rsa.publicKey.getKeyPrimitives()
        let rsaJWK = try JWK(json: [
            "kty": "RSA", "kid": "idp-1", "use": "sig", "n": .string(Base64URL.encodeToString(primitives.modulus)),
            "e": .string(Base64URL.encodeToString(primitives.publicExponent)),
        ])
        let ec = ServiceKey.generate().with(kid: "idp-2")
        let verifier = BearerTokenVerifier(
            keys: try KeyRing([rsaJWK, try JWK(json: ec.publicJSON!)]), issuer: "https://idp", audience: "toto")
        let good = claims([("sub", "u1"), ("exp", .int(now + 60)), ("iss", "https://idp"), ("aud", ["other", "toto"])])
        #expect(try verifier.subject(of: try rs256Token(rsa, kid: "idp-1", claims: good), now: now) == "u1")
        let es = String(decoding: try JWSSigner(key: ec).sign(good), as: UTF8.self)
        #expect(try verifier.subject(of: es, now: now) == "u1")
        // Wrong issuer or audience.
        let wrongIssuer = claims([("sub", "u1"), ("exp", .int(now + 60)), ("iss", "https://evil"), ("aud", "toto")])
        #expect(throws: BearerTokenVerifier.Failure.self) { try verifier.subject(of: try rs256Token(rsa, kid: "idp-1", claims: wrongIssuer), now: now) }
        let wrongAudience = claims([("sub", "u1"), ("exp", .int(now + 60)), ("iss", "https://idp"), ("aud", "other")])
        #expect(throws: BearerTokenVerifier.Failure.self) { try verifier.subject(of: try rs256Token(rsa, kid: "idp-1", claims: wrongAudience), now: now) }
        // A token without kid is refused when the set has several keys.
        let noKid = Base64URL.encodeToString(Array(#"{"alg":"ES256"}"#.utf8)) + "." + Base64URL.encodeToString(good) + ".AAAA"
        #expect {
            try verifier.subject(of: noKid, now: now)
        } throws: { String(describing: $0).contains("no kid") }
    }

    @Test("HS256 secrets: the claim checks", arguments: [
        ([("sub", JSON.string("u1")), ("exp", .int(1_800_000_060))], "u1"),
        ([("uid", "u9"), ("exp", .int(1_800_000_060))], "u9"),
        ([("sub", "u1"), ("uid", "u9"), ("exp", .int(1_800_000_060))], "u1"),
        ([("sub", "u1"), ("exp", .double(1_800_000_060.5))], "u1"),
        ([("sub", "u1"), ("exp", .int(1_799_999_950))], "u1"),  // expired 50 s ago: within the 60 s leeway
        ([("sub", "u1"), ("exp", .int(1_799_999_900))], "the token expired"),
        ([("sub", "u1")], "the token has no exp claim"),
        ([("sub", "u1"), ("exp", "soon")], "exp is not a number"),
        ([("sub", "u1"), ("exp", .int(1_800_000_060)), ("nbf", .int(1_800_000_100))], "not valid before"),
        ([("sub", "u1"), ("exp", .int(1_800_000_060)), ("nbf", .int(1_800_000_001))], "not valid before"),  // no leeway on nbf
        ([("sub", "u1"), ("exp", .int(1_800_000_060)), ("nbf", .int(1_800_000_000))], "u1"),
        ([("sub", "u1"), ("exp", .int(1_800_000_060)), ("nbf", .int(1_799_999_990))], "u1"),
        ([("sub", ""), ("exp", .int(1_800_000_060))], "no subject"),
        ([("exp", .int(1_800_000_060))], "no subject"),
        // A subject of another type is refused, not passed over for uid (issue 33).
        ([("sub", .int(5)), ("uid", "alice"), ("exp", .int(1_800_000_060))], "the token's sub claim is a number, not a string"),
        ([("sub", .null), ("uid", "alice"), ("exp", .int(1_800_000_060))], "the token's sub claim is null, not a string"),
        ([("uid", .bool(true)), ("exp", .int(1_800_000_060))], "the token's uid claim is a boolean, not a string"),
        // Numbers at the limits: checked without trapping (a trap here killed the server).
        ([("sub", "u1"), ("exp", .int(.max))], "u1"),
        ([("sub", "u1"), ("exp", .int(.max - 59))], "u1"),
        ([("sub", "u1"), ("exp", .int(.max - 60))], "u1"),
        ([("sub", "u1"), ("exp", .int(.min))], "the token expired"),
        ([("sub", "u1"), ("exp", .double(1e300))], "u1"),
        ([("sub", "u1"), ("exp", .double(-1e300))], "the token expired"),
        ([("sub", "u1"), ("exp", .int(.max)), ("nbf", .int(.max))], "not valid before"),
        ([("sub", "u1"), ("exp", .int(.max)), ("nbf", .int(.min))], "u1"),
        ([("sub", "u1"), ("exp", .int(.max)), ("nbf", .double(1e300))], "not valid before"),
    ] as [([(String, JSON)], String)])
    func hs256(members: [(String, JSON)], outcome: String) throws {
        let secret = "a-secret-that-is-at-least-32-bytes-long"
        let verifier = try BearerTokenVerifier.hs256(secret: secret)
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        let token = String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(claims(members)), as: UTF8.self)
        do {
            #expect(try verifier.subject(of: token, now: now) == outcome)
        } catch {
            #expect(error.description.contains(outcome), "\(error)")
        }
    }

    @Test("a leeway at the limit does not overflow either")
    func hugeLeeway() throws {
        let secret = "a-secret-that-is-at-least-32-bytes-long"
        let verifier = try BearerTokenVerifier.hs256(secret: secret, leeway: .max)
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        func token(exp: Int64) throws -> String {
            String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(claims([("sub", "u1"), ("exp", .int(exp))])), as: UTF8.self)
        }
        #expect(try verifier.subject(of: try token(exp: .max), now: .max) == "u1")
        #expect(try verifier.subject(of: try token(exp: 1), now: .max) == "u1")
        #expect(throws: BearerTokenVerifier.Failure.self) { try verifier.subject(of: try token(exp: .min), now: .max) }
    }

    @Test("a kid that is not a string is refused, not taken as no kid (which would choose the only key)", arguments: ["5", "null", #"["k"]"#, "{}"])
    func kidOfAnotherType(kid: String) throws {
        let secret = "a-secret-that-is-at-least-32-bytes-long"
        let verifier = try BearerTokenVerifier.hs256(secret: secret)
        let header = Base64URL.encodeToString(Array(#"{"alg":"HS256","kid":\#(kid)}"#.utf8))
        let input = header + "." + Base64URL.encodeToString(claims([("sub", "u1"), ("exp", .int(now + 60))]))
        let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: Array(secret.utf8)))
        let token = input + "." + Base64URL.encodeToString(Array(mac))
        #expect {
            try verifier.subject(of: token, now: now)
        } throws: { String(describing: $0).contains(#"header "kid" must be a string"#) }
        // The same token without a kid is this application's: accepted.
        let plain = Base64URL.encodeToString(Array(#"{"alg":"HS256"}"#.utf8)) + "." + Base64URL.encodeToString(claims([("sub", "u1"), ("exp", .int(now + 60))]))
        let plainMAC = HMAC<SHA256>.authenticationCode(for: Array(plain.utf8), using: SymmetricKey(data: Array(secret.utf8)))
        #expect(try verifier.subject(of: plain + "." + Base64URL.encodeToString(Array(plainMAC)), now: now) == "u1")
    }

    @Test("a repeated claim or header member is refused, naming it, never the last one winning (issue 33)")
    func repeatedMembers() throws {
        let secret = "a-secret-that-is-at-least-32-bytes-long"
        let verifier = try BearerTokenVerifier.hs256(secret: secret)
        func signed(header: String, claims: String) -> String {
            let input = Base64URL.encodeToString(Array(header.utf8)) + "." + Base64URL.encodeToString(Array(claims.utf8))
            let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: Array(secret.utf8)))
            return input + "." + Base64URL.encodeToString(Array(mac))
        }
        let claims = #"{"sub":"mallory","sub":"alice","exp":\#(now + 60)}"#
        #expect {
            try verifier.subject(of: signed(header: #"{"alg":"HS256"}"#, claims: claims), now: now)
        } throws: { String(describing: $0).contains(#"repeats the key "sub""#) }
        #expect {
            try verifier.subject(of: signed(header: #"{"alg":"none","alg":"HS256"}"#, claims: #"{"sub":"alice","exp":\#(now + 60)}"#), now: now)
        } throws: { String(describing: $0).contains(#"repeats the key "alg""#) }
        #expect(try verifier.subject(of: signed(header: #"{"alg":"HS256"}"#, claims: #"{"sub":"alice","exp":\#(now + 60)}"#), now: now) == "alice")
    }

    @Test("a short HS256 secret is refused")
    func shortSecret() {
        #expect(throws: JOSEError.self) { try BearerTokenVerifier.hs256(secret: "short") }
    }
}
