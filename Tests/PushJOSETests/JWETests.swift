import Testing
import PushCore
@testable import PushJOSE

@Suite("JWE")
struct JWETests {
    let plaintext = bytes(#"{"t":"v","m":"value","a":"toto","p":"/p","s":"OK","v":"héllo"}"#)

    static let cases: [(JWEKeyAlgorithm, JWEContentAlgorithm, String)] = [
        (.direct, .a256gcm, "enc-dir"), (.direct, .a128gcm, "enc-dir128"), (.a256kw, .a256gcm, "enc-kw"),
        (.a128kw, .a128gcm, "enc-kw128"), (.a256kw, .a128gcm, "enc-kw"), (.ecdhES, .a256gcm, "dev-ec"),
        (.ecdhES, .a128gcm, "dev-ec"), (.ecdhESA256KW, .a256gcm, "dev-ec"), (.rsaOAEP256, .a256gcm, "dev-rsa"),
        (.rsaOAEP256, .a128gcm, "dev-rsa"),
    ]

    /// The key an application holds to encrypt: the device's public key, or its own secret.
    func encryptionKey(_ kid: String) throws -> JWK {
        let key = try Fixtures.key(kid)
        return kid.hasPrefix("dev-") ? try JWK(json: key.publicJSON!) : key
    }

    @Test("each algorithm pair encrypts and decrypts, with the predicted length", arguments: cases)
    func roundTrip(alg: JWEKeyAlgorithm, enc: JWEContentAlgorithm, kid: String) throws {
        let encrypter = try JWEEncrypter(keyAlgorithm: alg, contentAlgorithm: enc, key: try encryptionKey(kid))
        let token = try encrypter.encrypt(plaintext)
        #expect(token.count == encrypter.compactLength(plaintextLength: plaintext.count))
        let decrypted = try JWE.decrypt(token, keys: try Fixtures.keyRing())
        #expect(decrypted.plaintext == plaintext)
        #expect(decrypted.keyAlgorithm == alg && decrypted.contentAlgorithm == enc && decrypted.kid == kid)
    }

    func code(_ token: [UInt8], _ ring: KeyRing) throws -> JOSEError.Code? {
        do {
            _ = try JWE.decrypt(token, keys: ring)
            return nil
        } catch {
            return error.code
        }
    }

    @Test("a wrong key, an altered token, an unknown kid and unsupported algorithms are each named")
    func failures() throws {
        let ring = try Fixtures.keyRing()
        let token = try JWEEncrypter(keyAlgorithm: .direct, contentAlgorithm: .a256gcm, key: try Fixtures.key("enc-dir")).encrypt(plaintext)
        // Another key under the same kid.
        let swapped = try KeyRing([try Fixtures.key("enc-kw").with(kid: "enc-dir")])
        if case .wrongKey = try code(token, swapped) {} else { Issue.record("swapped key") }
        // An altered ciphertext.
        var parts = token.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map(Array.init)
        parts[3][0] = parts[3][0] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        if case .wrongKey = try code(Array(parts.joined(separator: [UInt8(ascii: ".")])), ring) {} else { Issue.record("altered") }
        // Key wrap and RSA with the wrong key.
        let wrapped = try JWEEncrypter(keyAlgorithm: .a256kw, contentAlgorithm: .a256gcm, key: try Fixtures.key("enc-kw")).encrypt(plaintext)
        let otherKEK = try KeyRing([try JWK(json: ["kty": "oct", "kid": "enc-kw", "k": .string(Base64URL.encodeToString([UInt8](repeating: 1, count: 32)))])])
        if case .wrongKey = try code(wrapped, otherKEK) {} else { Issue.record("unwrap") }
        // Unknown kid, unsupported algorithms, compression.
        let header = { (json: String) in Base64URL.encode(bytes(json)) }
        func withHeader(_ json: String) -> [UInt8] {
            header(json) + Array(token.drop { $0 != UInt8(ascii: ".") })
        }
        #expect(try code(withHeader(#"{"alg":"dir","enc":"A256GCM","kid":"nope"}"#), ring) == .unknownKeyID("nope"))
        #expect(try code(withHeader(#"{"alg":"RSA1_5","enc":"A256GCM","kid":"dev-rsa"}"#), ring) == .unsupportedAlgorithm("RSA1_5"))
        #expect(try code(withHeader(#"{"alg":"dir","enc":"A128CBC-HS256","kid":"enc-dir"}"#), ring) == .unsupportedAlgorithm("A128CBC-HS256"))
        if case .malformedToken = try code(withHeader(#"{"alg":"dir","enc":"A256GCM","kid":"enc-dir","zip":"DEF"}"#), ring) {} else {
            Issue.record("zip")
        }
        if case .malformedToken = try code(bytes("a.b.c"), ring) {} else { Issue.record("3 parts") }
    }

    @Test("keys that do not fit the algorithm are refused")
    func keyChecks() throws {
        #expect(throws: JOSEError.self) { try JWEEncrypter(keyAlgorithm: .direct, contentAlgorithm: .a256gcm, key: try Fixtures.key("enc-dir128")) }
        #expect(throws: JOSEError.self) { try JWEEncrypter(keyAlgorithm: .a128kw, contentAlgorithm: .a128gcm, key: try Fixtures.key("enc-kw")) }
        #expect(throws: JOSEError.self) { try JWEEncrypter(keyAlgorithm: .ecdhES, contentAlgorithm: .a256gcm, key: try Fixtures.key("dev-rsa")) }
        #expect(throws: JOSEError.self) { try JWEEncrypter(keyAlgorithm: .rsaOAEP256, contentAlgorithm: .a256gcm, key: try Fixtures.key("dev-ec")) }
        #expect(throws: JOSEError.self) { try JWEEncrypter(keyAlgorithm: .direct, contentAlgorithm: .a256gcm, key: try Fixtures.key("sig-hs")) }
    }
}
