import Crypto
import CryptoExtras
import Testing
import PushCore
import PushJSON
@testable import PushJOSE

/// A device decodes what it receives with `decode`'s rules; each payload here is one an
/// attacker can make, and each must be refused with a reason.
@Suite("Forged and malformed v2 payloads are refused")
struct ForgedPayloadTests {
    static let event = #"{"t":"v","m":"value","a":"toto","p":"/p","s":"OK","v":"forged"}"#

    let keys: KeyRing

    init() throws {
        keys = try Fixtures.keyRing()
    }

    func payload(evt: [UInt8], kid: String?) -> String {
        var out = JSONWriter()
        out.raw("{\"srv\":\"webcom\"")
        if let kid {
            out.raw(",\"kid\":")
            out.writeString(kid)
        }
        out.raw(",\"evt\":\"")
        out.raw(evt)
        out.raw("\",\"ver\":\"v2\"}")
        return out.string
    }

    /// An encrypter to a device's key, from its public part only: what anyone can do.
    func publicEncrypter(_ kid: String, _ algorithm: JWEKeyAlgorithm, contentType: String?) throws -> JWEEncrypter {
        let publicKey = try JWK(json: try Fixtures.key(kid).publicJSON!)
        return try JWEEncrypter(keyAlgorithm: algorithm, contentAlgorithm: .a256gcm, key: publicKey, kid: kid, contentType: contentType)
    }

    func refusal(_ payload: String) -> String? {
        do {
            _ = try PayloadDecoder(keys: keys).decode(bytes(payload))
            return nil
        } catch {
            return String(describing: error)
        }
    }

    @Test("an event encrypted to the device's public key without a signature is refused",
          arguments: [("dev-ec", JWEKeyAlgorithm.ecdhES), ("dev-ec", .ecdhESA256KW), ("dev-rsa", .rsaOAEP256)])
    func unsignedAsymmetric(kid: String, algorithm: JWEKeyAlgorithm) throws {
        for contentType in [nil, "JSON", "application/json"] as [String?] {
            let token = try publicEncrypter(kid, algorithm, contentType: contentType).encrypt(bytes(Self.event))
            let reason = refusal(payload(evt: token, kid: kid))
            #expect(reason?.contains("must be the service's signed JWS") == true, "got \(String(describing: reason))")
        }
    }

    @Test("a nested JWS that claims cty JWT but is signed by someone else is refused",
          arguments: [("dev-ec", JWEKeyAlgorithm.ecdhES), ("dev-rsa", .rsaOAEP256)])
    func foreignSignature(kid: String, algorithm: JWEKeyAlgorithm) throws {
        // The attacker's own key, with a kid the device knows.
        let attacker = P256.Signing.PrivateKey()
        let forgedKey = JWK(material: .ecP256(public: attacker.publicKey, private: attacker), kid: "sig-es", use: "sig")
        let inner = try JWSSigner(key: forgedKey).sign(bytes(Self.event))
        let token = try publicEncrypter(kid, algorithm, contentType: "JWT").encrypt(inner)
        #expect(refusal(payload(evt: token, kid: kid)) == "bad signature")
        // An HS256 "signature" made with a secret the device does not hold.
        let unknown = JWK(material: .octet(SymmetricKey(size: .bits256)), kid: "sig-unknown", use: "sig")
        let token2 = try publicEncrypter(kid, algorithm, contentType: "JWT").encrypt(try JWSSigner(key: unknown).sign(bytes(Self.event)))
        #expect(refusal(payload(evt: token2, kid: kid)) == "unknown kid \"sig-unknown\"")
    }

    @Test("a nested JWS made with alg none is refused")
    func algNone() throws {
        let header = Base64URL.encode(bytes(#"{"alg":"none","kid":"sig-es"}"#))
        let inner = header + bytes(".") + Base64URL.encode(bytes(Self.event)) + bytes(".")
        let token = try publicEncrypter("dev-ec", .ecdhES, contentType: "JWT").encrypt(inner)
        #expect(refusal(payload(evt: token, kid: "dev-ec")) == "unsupported algorithm \"none\"")
    }

    @Test("a symmetric JWE must carry the event itself, with the header the service writes")
    func symmetricHeaders() throws {
        let key = try Fixtures.key("enc-dir")
        let nested = try JWEEncrypter(keyAlgorithm: .direct, contentAlgorithm: .a256gcm, key: key, kid: "enc-dir", contentType: "JWT")
        let signed = try JWSSigner(key: try Fixtures.key("sig-es")).sign(bytes(Self.event))
        #expect(refusal(payload(evt: try nested.encrypt(signed), kid: "enc-dir"))?.contains("unexpected member \"cty\"") == true)
        let plain = try JWEEncrypter(keyAlgorithm: .direct, contentAlgorithm: .a256gcm, key: key, kid: "enc-dir")
        #expect(refusal(payload(evt: try plain.encrypt(bytes(Self.event)), kid: "enc-dir")) == nil)
    }

    @Test("a JWE without the payload's kid field is refused")
    func missingPayloadKID() throws {
        let encrypter = try JWEEncrypter(keyAlgorithm: .direct, contentAlgorithm: .a256gcm, key: try Fixtures.key("enc-dir"), kid: "enc-dir")
        let reason = refusal(payload(evt: try encrypter.encrypt(bytes(Self.event)), kid: nil))
        #expect(reason?.contains("no kid field") == true, "got \(String(describing: reason))")
    }

    @Test("headers with members the service never writes are refused")
    func unexpectedHeaderMembers() throws {
        let signer = try Fixtures.key("sig-hs")
        guard case .octet(let secret) = signer.material else { Issue.record("sig-hs is not oct"); return }
        for header in [#"{"alg":"HS256","kid":"sig-hs","typ":"JWT"}"#, #"{"alg":"HS256","kid":"sig-hs","jku":"https://evil"}"#] {
            let input = Base64URL.encode(bytes(header)) + bytes(".") + Base64URL.encode(bytes(Self.event))
            let mac = Array(HMAC<SHA256>.authenticationCode(for: input, using: secret))
            let token = input + bytes(".") + Base64URL.encode(mac)
            let reason = refusal(payload(evt: token, kid: nil))
            #expect(reason?.contains("unexpected member") == true, "got \(String(describing: reason))")
        }
    }

    @Test("fields a v2 payload does not have are refused")
    func unexpectedFields() throws {
        let token = try JWSSigner(key: try Fixtures.key("sig-es")).sign(bytes(Self.event))
        let text = payload(evt: token, kid: nil).replacingOccurrences(of: "\"ver\"", with: "\"x\":\"1\",\"ver\"")
        #expect(refusal(text)?.contains("unexpected field \"x\"") == true)
        #expect(refusal(payload(evt: token, kid: nil)) == nil)
    }

    @Test("an evt signed with RS256 (a bearer-token algorithm) is refused")
    func rs256() throws {
        // Build an RS256 JWS with the device's RSA private key, exported as a signing key.
        let rsa = try Fixtures.key("dev-rsa")
        guard case .rsa(let material) = rsa.material, let privateKey = material.privateKey else {
            Issue.record("dev-rsa is not a private RSA key"); return
        }
        let signing = try _RSA.Signing.PrivateKey(derRepresentation: privateKey.derRepresentation)
        var ring = keys.keys
        ring.append(JWK(material: rsa.material, kid: "sig-rsa", use: "sig"))
        let keys = try KeyRing(ring)
        let input = Base64URL.encode(bytes(#"{"alg":"RS256","kid":"sig-rsa"}"#)) + bytes(".") + Base64URL.encode(bytes(Self.event))
        let signature = try signing.signature(for: input, padding: .insecurePKCS1v1_5)
        let token = input + bytes(".") + Base64URL.encode([UInt8](signature.rawRepresentation))
        do {
            _ = try PayloadDecoder(keys: keys).decode(bytes(payload(evt: token, kid: nil)))
            Issue.record("an RS256 evt was accepted")
        } catch {
            #expect(String(describing: error) == "unsupported algorithm \"RS256\"")
        }
    }

    @Test("a payload that repeats a field is refused: readers would disagree on which one counts")
    func repeatedFields() throws {
        let token = String(decoding: try JWSSigner(key: try Fixtures.key("sig-es")).sign(bytes(Self.event)), as: UTF8.self)
        let text = #"{"srv":"webcom","evt":"garbage","ver":"v1","evt":"\#(token)","ver":"v2"}"#
        #expect(refusal(text)?.contains("repeats the key") == true, "\(String(describing: refusal(text)))")
    }

    @Test("an RSA key written with a leading zero octet is refused (it would have another thumbprint)")
    func rsaLeadingZero() throws {
        guard var object = try Fixtures.key("dev-rsa").publicJSON?.objectValue, case .string(let n)? = object[Key("n")] else {
            Issue.record("no dev-rsa")
            return
        }
        object.set(Key("n"), to: .string(Base64URL.encodeToString([0] + Base64URL.decode(Array(n.utf8))!)))
        #expect(throws: JOSEError.self) { try JWK(json: .object(object)) }
    }
}
