import Crypto
import Testing
import PushCore
@testable import PushJOSE

@Suite("Known answers from the standards (fixtures/jose)")
struct KnownAnswerTests {
    @Test("RFC 7515 A.1: HS256 verifies, and signing the same input gives the same signature")
    func rfc7515HS256() throws {
        let vector = try Fixtures.json("rfc7515-a1-hs256.json")
        let key = try JWK(json: vector["jwk"]!)
        let token = bytes(vector.string("token"))
        #expect(try JWS.verify(token, key: key).payload == bytes(vector.string("payload")))
        // HMAC is deterministic: recompute the signature over the RFC's exact signing input.
        let parts = vector.string("token").split(separator: ".")
        guard case .octet(let secret) = key.material else { Issue.record("not oct"); return }
        let mac = HMAC<SHA256>.authenticationCode(for: bytes("\(parts[0]).\(parts[1])"), using: secret)
        #expect(Base64URL.encodeToString(mac) == String(parts[2]))
    }

    @Test("RFC 7515 A.3: ES256 verifies")
    func rfc7515ES256() throws {
        let vector = try Fixtures.json("rfc7515-a3-es256.json")
        let key = try JWK(json: vector["jwk"]!)
        #expect(try JWS.verify(bytes(vector.string("token")), key: key).payload == bytes(vector.string("payload")))
    }

    @Test("RFC 7520 4.4: HS256 verifies, and our signer reproduces the token byte for byte")
    func rfc7520HS256() throws {
        let vector = try Fixtures.json("rfc7520-4.4-hs256.json")
        let key = try JWK(json: vector["jwk"]!)
        let token = bytes(vector.string("token"))
        #expect(try JWS.verify(token, key: key).payload == bytes(vector.string("payload")))
        // Our header is {"alg":"HS256","kid":…}, the RFC's too: the whole token must match.
        #expect(try JWSSigner(key: key).sign(bytes(vector.string("payload"))) == token)
    }

    @Test("RFC 3394: AES key wrap vectors wrap and unwrap")
    func rfc3394() throws {
        let vectors = try Fixtures.json("rfc3394-aes-key-wrap.json")["vectors"]!.arrayValue!
        #expect(vectors.count == 3)
        for vector in vectors {
            let kek = SymmetricKey(data: hex(vector.string("kek")))
            let key = SymmetricKey(data: hex(vector.string("key")))
            let wrapped = try AES.KeyWrap.wrap(key, using: kek)
            #expect([UInt8](wrapped) == hex(vector.string("wrapped")), "section \(vector.string("section"))")
            let unwrapped = try AES.KeyWrap.unwrap(hex(vector.string("wrapped")), using: kek)
            #expect(unwrapped == key)
        }
    }

    @Test("RFC 7518 Appendix C: ECDH-ES agreement and Concat KDF derive the RFC's key")
    func rfc7518ECDHES() throws {
        let vector = try Fixtures.json("rfc7518-c-ecdh-es.json")
        let ephemeral = try JWK(json: vector["ephemeral"]!)
        let recipient = try JWK(json: vector["recipient"]!)
        guard case .ecP256(_, let ephemeralPrivate?) = ephemeral.material,
            case .ecP256(let recipientPublic, let recipientPrivate?) = recipient.material
        else {
            Issue.record("keys")
            return
        }
        let z = try P256.KeyAgreement.PrivateKey(rawRepresentation: ephemeralPrivate.rawRepresentation)
            .sharedSecretFromKeyAgreement(with: P256.KeyAgreement.PublicKey(rawRepresentation: recipientPublic.rawRepresentation))
        let derived = ConcatKDF.derive(
            sharedSecret: z.withUnsafeBytes { Array($0) }, algorithmID: vector.string("enc"), keyBitLength: 128,
            partyUInfo: Base64URL.decode(vector.string("apu"))!, partyVInfo: Base64URL.decode(vector.string("apv"))!)
        #expect(Base64URL.encodeToString(derived.withUnsafeBytes { Array($0) }) == vector.string("derivedKey"))
        // The recipient reaches the same secret from its side.
        let zRecipient = try P256.KeyAgreement.PrivateKey(rawRepresentation: recipientPrivate.rawRepresentation)
            .sharedSecretFromKeyAgreement(with: P256.KeyAgreement.PublicKey(rawRepresentation: ephemeral.material.ecPublic!.rawRepresentation))
        #expect(zRecipient == z)
    }

    @Test("RFC 7520 5.6 (dir, A128GCM) and 5.8 (A128KW, A128GCM) decrypt to the RFC's plaintext",
        arguments: ["rfc7520-5.6-dir-a128gcm.json", "rfc7520-5.8-a128kw-a128gcm.json"])
    func rfc7520JWE(file: String) throws {
        let vector = try Fixtures.json(file)
        let ring = try KeyRing([try JWK(json: vector["jwk"]!)])
        let decrypted = try JWE.decrypt(bytes(vector.string("token")), keys: ring)
        #expect(decrypted.plaintext == bytes(vector.string("plaintext")))
    }

    @Test("RFC 7638 thumbprints agree with joserfc's")
    func thumbprints() throws {
        let expected = try Fixtures.json("test-keyset-thumbprints.json")["thumbprints"]!.objectValue!
        let ring = try Fixtures.keyRing()
        #expect(expected.count == ring.keys.count)
        for (kid, thumbprint) in expected {
            #expect(ring.key(kid: kid.string)?.thumbprint == thumbprint.stringValue, "\(kid)")
        }
    }
}

extension JWK.Material {
    var ecPublic: P256.Signing.PublicKey? {
        if case .ecP256(let publicKey, _) = self { return publicKey }
        return nil
    }
}
