import PushCore
@testable import PushJOSE
import PushJSON
import PushMatching
import PushTestSupport
import Testing

/// Seeded, bounded mutation suites over tokens and payloads: a damaged token is never
/// accepted; an accepted payload always reads back to the event that was sealed.
@Suite("Bad input: tokens, JWS and JWE")
struct JOSEBadInputTests {
    static let secret = "a-secret-that-is-at-least-32-bytes-long"
    static let now: Int64 = 1_800_000_000

    func sign(_ claims: JSON) throws -> [UInt8] {
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(Self.secret.utf8)))])
        return try JWSSigner(key: key, algorithm: .hs256).sign(Array(claims.description.utf8))
    }

    @Test("a bearer token with any byte changed is refused", arguments: [1, 2, 3] as [UInt64])
    func damagedTokens(seed: UInt64) throws {
        var mutator = Mutator(seed: seed)
        let verifier = try BearerTokenVerifier.hs256(secret: Self.secret)
        let token = try sign(["sub": "u1", "exp": .int(Self.now + 60), "iat": .int(Self.now)])
        #expect(try verifier.subject(of: String(decoding: token, as: UTF8.self), now: Self.now) == "u1")
        for round in 0..<3_000 {
            let damaged = mutator.mutateBytes(token)
            guard damaged != token else { continue }
            do {
                let subject = try verifier.subject(of: String(decoding: damaged, as: UTF8.self), now: Self.now)
                Issue.record("seed \(seed) round \(round): a damaged token was accepted for \(subject)")
            } catch {
                #expect(error.description.utf8.count <= 3000, "seed \(seed) round \(round)")
            }
        }
    }

    @Test("claims of every shape, validly signed, are checked without trapping", arguments: [1, 2, 3] as [UInt64])
    func strangeClaims(seed: UInt64) throws {
        var mutator = Mutator(seed: seed)
        let verifier = try BearerTokenVerifier.hs256(secret: Self.secret, issuer: "https://idp", audience: "toto", leeway: 60)
        let claims: JSON = [
            "sub": "u1", "exp": .int(Self.now + 60), "nbf": .int(Self.now - 10), "iss": "https://idp", "aud": ["toto", "x"],
        ]
        for round in 0..<2_000 {
            let mutated = mutator.mutateJSON(claims)
            let token = String(decoding: try sign(mutated), as: UTF8.self)
            for now in [Self.now, .max, .min, 0] {
                do {
                    let subject = try verifier.subject(of: token, now: now)
                    // Accepted: then the claims really allow it.
                    #expect(!subject.isEmpty)
                    #expect(mutated["iss"] == "https://idp", "seed \(seed) round \(round)")
                } catch {
                    #expect(!error.description.isEmpty)
                }
            }
        }
    }

    static let encryptions: [EncryptionSpec?] = [
        nil, EncryptionSpec(alg: "dir", kid: "enc-dir"), EncryptionSpec(alg: "A256KW", kid: "enc-kw"),
        EncryptionSpec(alg: "ECDH-ES", kid: "dev-ec"), EncryptionSpec(alg: "ECDH-ES+A256KW", kid: "dev-ec"),
        EncryptionSpec(alg: "RSA-OAEP-256", kid: "dev-rsa"),
    ]

    @Test("a damaged v2 payload is refused, or reads back to the very event sealed", arguments: [1, 2] as [UInt64])
    func damagedPayloads(seed: UInt64) throws {
        var mutator = Mutator(seed: seed)
        let keys = try Fixtures.keyRing()
        let factory = EventSealerFactory(keys: keys)
        let decoder = PayloadDecoder(keys: keys)
        for (index, encryption) in Self.encryptions.enumerated() {
            var spec = encryption
            if let kid = spec?.kid, kid.hasPrefix("dev-") { spec?.jwk = try Fixtures.key(kid).publicJSON }
            let signing = ["sig-es", "sig-hs", "sig-ed"][index % 3]
            let sealer = try factory.sealer(signing: signing, encryption: spec)
            var builder = V2PayloadBuilder()
            var out = JSONWriter()
            try builder.build(Event(app: "toto", path: "/p", body: .value(["a": 1, "b": "x"])), sealer: sealer, into: &out)
            let payload = out.bytes
            let event = try decoder.decode(payload)
            for round in 0..<400 {
                let damaged = mutator.mutateBytes(payload)
                do {
                    let decoded = try decoder.decode(damaged)
                    #expect(decoded == event, "seed \(seed) \(String(describing: encryption?.alg)) round \(round): accepted a different event")
                } catch {
                    #expect(String(describing: error).utf8.count <= 3000)
                }
            }
        }
    }

    @Test("damaged JWKs and JWK Sets are refused with a reason", arguments: [1, 2, 3] as [UInt64])
    func damagedKeys(seed: UInt64) throws {
        var mutator = Mutator(seed: seed)
        let set = try Fixtures.json("test-keyset.json")
        let text = Array(set.description.utf8)
        for round in 0..<1_000 {
            do {
                if mutator.random.chance(50) {
                    _ = try KeyRing(jwkSetText: mutator.mutateBytes(text))
                } else {
                    _ = try KeyRing(jwkSet: mutator.mutateJSON(set))
                }
            } catch {
                #expect(!error.description.isEmpty && error.description.utf8.count <= 3000, "seed \(seed) round \(round)")
            }
        }
    }
}
