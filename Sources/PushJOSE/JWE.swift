import Crypto
import CryptoExtras
import PushCore
import PushJSON

/// Key management algorithms (RFC 7518 §4).
public enum JWEKeyAlgorithm: String, Sendable, CaseIterable {
    case direct = "dir"
    case a128kw = "A128KW"
    case a256kw = "A256KW"
    case ecdhES = "ECDH-ES"
    case ecdhESA256KW = "ECDH-ES+A256KW"
    case rsaOAEP256 = "RSA-OAEP-256"

    /// Asymmetric algorithms encrypt to a device's public key; symmetric ones use a key the
    /// application configures.
    public var isAsymmetric: Bool {
        switch self {
        case .ecdhES, .ecdhESA256KW, .rsaOAEP256: return true
        case .direct, .a128kw, .a256kw: return false
        }
    }

    public static func named(_ name: String) throws(JOSEError) -> JWEKeyAlgorithm {
        guard let algorithm = JWEKeyAlgorithm(rawValue: name) else { throw JOSEError(.unsupportedAlgorithm(name)) }
        return algorithm
    }
}

/// Content encryption algorithms (RFC 7518 §5.3).
public enum JWEContentAlgorithm: String, Sendable, CaseIterable {
    case a128gcm = "A128GCM"
    case a256gcm = "A256GCM"

    public var keyByteCount: Int { self == .a128gcm ? 16 : 32 }

    public static func named(_ name: String) throws(JOSEError) -> JWEContentAlgorithm {
        guard let algorithm = JWEContentAlgorithm(rawValue: name) else { throw JOSEError(.unsupportedAlgorithm(name)) }
        return algorithm
    }
}

/// Encrypts plaintexts to one key as compact JWE (RFC 7516 §7.1). The protected header is
/// `{"alg":…,"enc":…,"kid":…,"cty":…,"epk":…}` (absent members left out).
public struct JWEEncrypter: Sendable {
    public let keyAlgorithm: JWEKeyAlgorithm
    public let contentAlgorithm: JWEContentAlgorithm
    public let key: JWK
    public let kid: String?
    public let contentType: String?
    /// The encoded header when it is the same for every message (no `epk`).
    let fixedHeader: [UInt8]?
    /// The recipient's key for ECDH, converted once.
    let agreementKey: P256.KeyAgreement.PublicKey?

    public init(
        keyAlgorithm: JWEKeyAlgorithm, contentAlgorithm: JWEContentAlgorithm, key: JWK, kid: String? = nil,
        contentType: String? = nil
    ) throws(JOSEError) {
        try JWEEncrypter.check(key, keyAlgorithm, contentAlgorithm, decrypting: false)
        self.keyAlgorithm = keyAlgorithm
        self.contentAlgorithm = contentAlgorithm
        self.key = key
        self.kid = kid ?? key.kid
        self.contentType = contentType
        fixedHeader = keyAlgorithm.usesEphemeralKey
            ? nil : JWEEncrypter.encodeHeader(keyAlgorithm, contentAlgorithm, self.kid, contentType, epk: nil)
        if case .ecP256(let recipient, _) = key.material, keyAlgorithm.usesEphemeralKey {
            do {
                agreementKey = try P256.KeyAgreement.PublicKey(rawRepresentation: recipient.rawRepresentation)
            } catch {
                throw .invalidKey("\(key.label) is not a P-256 key-agreement key")
            }
        } else {
            agreementKey = nil
        }
    }

    /// Checks that `key` fits the algorithms.
    static func check(
        _ key: JWK, _ keyAlgorithm: JWEKeyAlgorithm, _ content: JWEContentAlgorithm, decrypting: Bool
    ) throws(JOSEError) {
        if let use = key.use, use != KeyUse.encryption.rawValue {
            throw .mismatch("\(key.label) is a signing key (use \"sig\"), not an encryption key")
        }
        // A dir key is the content key itself: its alg may name the content algorithm
        // (RFC 7520 §5.6 does so).
        if let alg = key.alg, alg != keyAlgorithm.rawValue, !(keyAlgorithm == .direct && alg == content.rawValue) {
            throw .mismatch("\(key.label) is for \(quote(alg)), not \(keyAlgorithm.rawValue)")
        }
        switch (keyAlgorithm, key.material) {
        case (.direct, .octet(let secret)):
            guard secret.bitCount == content.keyByteCount * 8 else {
                throw .mismatch("dir with \(content.rawValue) needs a \(content.keyByteCount * 8)-bit key; \(key.label) is not")
            }
        case (.a128kw, .octet(let secret)):
            guard secret.bitCount == 128 else { throw .mismatch("A128KW needs a 128-bit key; \(key.label) is not") }
        case (.a256kw, .octet(let secret)):
            guard secret.bitCount == 256 else { throw .mismatch("A256KW needs a 256-bit key; \(key.label) is not") }
        case (.ecdhES, .ecP256(_, let privateKey)), (.ecdhESA256KW, .ecP256(_, let privateKey)):
            if decrypting && privateKey == nil { throw .mismatch("\(key.label) has no private part (d) to decrypt with") }
        case (.rsaOAEP256, .rsa(let rsa)):
            if decrypting && rsa.privateKey == nil { throw .mismatch("\(key.label) has no private part to decrypt with") }
        default:
            throw .mismatch("\(keyAlgorithm.rawValue) needs \(keyAlgorithm.requiredKey), and \(key.label) is not one")
        }
    }

    static func encodeHeader(
        _ keyAlgorithm: JWEKeyAlgorithm, _ content: JWEContentAlgorithm, _ kid: String?, _ contentType: String?,
        epk: (x: [UInt8], y: [UInt8])?
    ) -> [UInt8] {
        var header = JSONWriter(capacity: 192)
        header.raw("{\"alg\":")
        header.writeString(keyAlgorithm.rawValue)
        header.raw(",\"enc\":")
        header.writeString(content.rawValue)
        if let kid {
            header.raw(",\"kid\":")
            header.writeString(kid)
        }
        if let contentType {
            header.raw(",\"cty\":")
            header.writeString(contentType)
        }
        if let epk {
            header.raw(",\"epk\":{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"")
            header.raw(Base64URL.encode(epk.x))
            header.raw("\",\"y\":\"")
            header.raw(Base64URL.encode(epk.y))
            header.raw("\"}")
        }
        header.raw("}")
        return Base64URL.encode(header.bytes)
    }

    /// Length of the encoded header (the same for every message: P-256 coordinates are
    /// always 32 bytes).
    var headerLength: Int {
        fixedHeader?.count
            ?? JWEEncrypter.encodeHeader(
                keyAlgorithm, contentAlgorithm, kid, contentType, epk: ([UInt8](repeating: 0, count: 32), [UInt8](repeating: 0, count: 32))
            ).count
    }

    /// Length of the encrypted key.
    var encryptedKeyLength: Int {
        switch keyAlgorithm {
        case .direct, .ecdhES: return 0
        case .a128kw, .a256kw, .ecdhESA256KW: return contentAlgorithm.keyByteCount + 8
        case .rsaOAEP256:
            if case .rsa(let rsa) = key.material { return (rsa.publicKey.keySizeInBits + 7) / 8 }
            return 0
        }
    }

    /// Length of the compact JWE of a plaintext of `plaintextLength` bytes.
    public func compactLength(plaintextLength: Int) -> Int {
        headerLength + 1 + Base64URL.encodedLength(encryptedKeyLength) + 1 + Base64URL.encodedLength(12) + 1
            + Base64URL.encodedLength(plaintextLength) + 1 + Base64URL.encodedLength(16)
    }

    /// The compact JWE of `plaintext`.
    public func encrypt(_ plaintext: [UInt8]) throws(JOSEError) -> [UInt8] {
        do {
            let header: [UInt8]
            let contentKey: SymmetricKey
            var encryptedKey: [UInt8] = []
            switch (keyAlgorithm, key.material) {
            case (.direct, .octet(let secret)):
                header = fixedHeader!
                contentKey = secret
            case (.a128kw, .octet(let kek)), (.a256kw, .octet(let kek)):
                header = fixedHeader!
                contentKey = SymmetricKey(data: RandomPool.bytes(contentAlgorithm.keyByteCount))
                encryptedKey = [UInt8](try AES.KeyWrap.wrap(contentKey, using: kek))
            case (.ecdhES, .ecP256), (.ecdhESA256KW, .ecP256):
                let ephemeral = P256.KeyAgreement.PrivateKey()
                let shared = try ephemeral.sharedSecretFromKeyAgreement(with: agreementKey!)
                let point = [UInt8](ephemeral.publicKey.rawRepresentation)
                header = JWEEncrypter.encodeHeader(
                    keyAlgorithm, contentAlgorithm, kid, contentType, epk: (Array(point[0..<32]), Array(point[32..<64])))
                let derived = ConcatKDF.derive(
                    sharedSecret: shared.withUnsafeBytes { Array($0) }, algorithmID: keyAlgorithm.kdfAlgorithmID(contentAlgorithm),
                    keyBitLength: keyAlgorithm.kdfKeyBits(contentAlgorithm))
                if keyAlgorithm == .ecdhES {
                    contentKey = derived
                } else {
                    contentKey = SymmetricKey(data: RandomPool.bytes(contentAlgorithm.keyByteCount))
                    encryptedKey = [UInt8](try AES.KeyWrap.wrap(contentKey, using: derived))
                }
            case (.rsaOAEP256, .rsa(let rsa)):
                header = fixedHeader!
                contentKey = SymmetricKey(data: RandomPool.bytes(contentAlgorithm.keyByteCount))
                encryptedKey = [UInt8](try contentKey.withUnsafeBytes { try rsa.publicKey.encrypt($0, padding: .PKCS1_OAEP_SHA256) })
            default:
                throw JOSEError.mismatch("\(keyAlgorithm.rawValue) cannot use \(key.label)")
            }
            let sealed = try AES.GCM.seal(
                plaintext, using: contentKey, nonce: try AES.GCM.Nonce(data: RandomPool.bytes(12)), authenticating: header)
            var token: [UInt8] = []
            token.reserveCapacity(compactLength(plaintextLength: plaintext.count))
            token.append(contentsOf: header)
            token.append(UInt8(ascii: "."))
            encryptedKey.withUnsafeBytes { Base64URL.encode($0, into: &token) }
            token.append(UInt8(ascii: "."))
            sealed.nonce.withUnsafeBytes { Base64URL.encode($0, into: &token) }
            token.append(UInt8(ascii: "."))
            sealed.ciphertext.withUnsafeBytes { Base64URL.encode($0, into: &token) }
            token.append(UInt8(ascii: "."))
            sealed.tag.withUnsafeBytes { Base64URL.encode($0, into: &token) }
            return token
        } catch let error as JOSEError {
            throw error
        } catch {
            throw .mismatch("encrypting with \(key.label) failed: \(error)")
        }
    }
}

extension JWEKeyAlgorithm {
    var usesEphemeralKey: Bool { self == .ecdhES || self == .ecdhESA256KW }

    var requiredKey: String {
        switch self {
        case .direct, .a128kw, .a256kw: return "an oct key"
        case .ecdhES, .ecdhESA256KW: return "an EC P-256 key"
        case .rsaOAEP256: return "an RSA key"
        }
    }

    /// AlgorithmID of the Concat KDF: the `enc` value for ECDH-ES, else the `alg` value.
    func kdfAlgorithmID(_ content: JWEContentAlgorithm) -> String {
        self == .ecdhES ? content.rawValue : rawValue
    }

    /// Bits the Concat KDF derives: the content key for ECDH-ES, the wrapping key otherwise.
    func kdfKeyBits(_ content: JWEContentAlgorithm) -> Int {
        self == .ecdhES ? content.keyByteCount * 8 : 256
    }
}

/// The Concat KDF of NIST SP 800-56A as RFC 7518 §4.6.2 applies it, with SHA-256.
public enum ConcatKDF {
    /// Derives `keyBitLength` bits from the shared secret Z. OtherInfo is
    /// AlgorithmID ‖ PartyUInfo ‖ PartyVInfo ‖ SuppPubInfo, each of the first three a 32-bit
    /// big-endian length and the bytes; SuppPubInfo is the key length in bits.
    public static func derive(
        sharedSecret z: [UInt8], algorithmID: String, keyBitLength: Int, partyUInfo: [UInt8] = [],
        partyVInfo: [UInt8] = []
    ) -> SymmetricKey {
        var otherInfo: [UInt8] = []
        func appendLength(_ value: Int) {
            otherInfo += [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
                          UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
        }
        let algorithm = Array(algorithmID.utf8)
        appendLength(algorithm.count)
        otherInfo += algorithm
        appendLength(partyUInfo.count)
        otherInfo += partyUInfo
        appendLength(partyVInfo.count)
        otherInfo += partyVInfo
        appendLength(keyBitLength)
        var output: [UInt8] = []
        var counter = 1
        while output.count * 8 < keyBitLength {
            var hash = SHA256()
            hash.update(data: [UInt8(counter >> 24 & 0xFF), UInt8(counter >> 16 & 0xFF), UInt8(counter >> 8 & 0xFF), UInt8(counter & 0xFF)])
            hash.update(data: z)
            hash.update(data: otherInfo)
            output += hash.finalize()
            counter += 1
        }
        return SymmetricKey(data: output.prefix(keyBitLength / 8))
    }
}

/// Decryption of compact JWE.
public enum JWE {
    public struct Decrypted: Sendable {
        public let plaintext: [UInt8]
        public let keyAlgorithm: JWEKeyAlgorithm
        public let contentAlgorithm: JWEContentAlgorithm
        public let kid: String?
        /// `cty`: `JWT` when the plaintext is a nested JWS.
        public let contentType: String?
        /// The whole protected header.
        public let header: JSONObject
    }

    /// Decrypts `token` with the key its header names (`kid`) in `keys`.
    public static func decrypt(_ token: [UInt8], keys: KeyRing) throws(JOSEError) -> Decrypted {
        let parts = try CompactParts(token, expected: 5, kind: "JWE")
        let header = try ProtectedHeader(encoded: parts[0])
        let keyAlgorithm = try JWEKeyAlgorithm.named(try header.requiredString("alg"))
        let content = try JWEContentAlgorithm.named(try header.requiredString("enc"))
        try header.rejectUnsupported(["crit", "zip"])
        guard let kid = header.kid else {
            throw .malformed("the JWE header has no kid, so no key can be chosen")
        }
        guard let key = keys.key(kid: kid, use: .encryption) else { throw JOSEError(.unknownKeyID(kid)) }
        try JWEEncrypter.check(key, keyAlgorithm, content, decrypting: true)
        func decode(_ index: Int, _ name: String) throws(JOSEError) -> [UInt8] {
            guard let bytes = Base64URL.decode(parts[index]) else { throw .malformed("the JWE \(name) is not base64url") }
            return bytes
        }
        let encryptedKey = try decode(1, "encrypted key")
        let iv = try decode(2, "initialization vector")
        let ciphertext = try decode(3, "ciphertext")
        let tag = try decode(4, "authentication tag")
        guard iv.count == 12 else { throw .malformed("the GCM initialization vector must be 12 bytes, not \(iv.count)") }
        guard tag.count == 16 else { throw .malformed("the GCM authentication tag must be 16 bytes, not \(tag.count)") }
        let contentKey = try contentKey(keyAlgorithm, content, key, header, encryptedKey)
        let plaintext: [UInt8]
        do {
            let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: iv), ciphertext: ciphertext, tag: tag)
            plaintext = [UInt8](try AES.GCM.open(box, using: contentKey, authenticating: Array(parts[0])))
        } catch {
            throw JOSEError(.wrongKey("content decryption failed: the token was encrypted with another key or altered"))
        }
        return Decrypted(
            plaintext: plaintext, keyAlgorithm: keyAlgorithm, contentAlgorithm: content, kid: kid,
            contentType: try header.string("cty"), header: header.object)
    }

    static func contentKey(
        _ keyAlgorithm: JWEKeyAlgorithm, _ content: JWEContentAlgorithm, _ key: JWK, _ header: ProtectedHeader,
        _ encryptedKey: [UInt8]
    ) throws(JOSEError) -> SymmetricKey {
        let contentKey: SymmetricKey
        switch (keyAlgorithm, key.material) {
        case (.direct, .octet(let secret)):
            guard encryptedKey.isEmpty else { throw .malformed("dir has an empty encrypted key part") }
            contentKey = secret
        case (.a128kw, .octet(let kek)), (.a256kw, .octet(let kek)):
            contentKey = try unwrap(encryptedKey, kek)
        case (.ecdhES, .ecP256(_, let privateKey?)), (.ecdhESA256KW, .ecP256(_, let privateKey?)):
            let epk = try ephemeralKey(header)
            let shared: SharedSecret
            do {
                let agreement = try P256.KeyAgreement.PrivateKey(rawRepresentation: privateKey.rawRepresentation)
                shared = try agreement.sharedSecretFromKeyAgreement(with: epk)
            } catch {
                throw .wrongKey("key agreement with the ephemeral key failed")
            }
            let derived = ConcatKDF.derive(
                sharedSecret: shared.withUnsafeBytes { Array($0) }, algorithmID: keyAlgorithm.kdfAlgorithmID(content),
                keyBitLength: keyAlgorithm.kdfKeyBits(content))
            if keyAlgorithm == .ecdhES {
                guard encryptedKey.isEmpty else { throw .malformed("ECDH-ES has an empty encrypted key part") }
                contentKey = derived
            } else {
                contentKey = try unwrap(encryptedKey, derived)
            }
        case (.rsaOAEP256, .rsa(let rsa)):
            guard let privateKey = rsa.privateKey,
                let decrypted = try? privateKey.decrypt(encryptedKey, padding: .PKCS1_OAEP_SHA256)
            else {
                throw .wrongKey("RSA-OAEP-256 could not decrypt the content key")
            }
            contentKey = SymmetricKey(data: decrypted)
        default:
            throw .mismatch("\(keyAlgorithm.rawValue) cannot use \(key.label)")
        }
        guard contentKey.bitCount == content.keyByteCount * 8 else {
            throw .wrongKey("the content key has \(contentKey.bitCount) bits; \(content.rawValue) needs \(content.keyByteCount * 8)")
        }
        return contentKey
    }

    static func unwrap(_ encryptedKey: [UInt8], _ kek: SymmetricKey) throws(JOSEError) -> SymmetricKey {
        do {
            return try AES.KeyWrap.unwrap(encryptedKey, using: kek)
        } catch {
            throw .wrongKey("AES key unwrap failed: the content key was wrapped with another key")
        }
    }

    static func ephemeralKey(_ header: ProtectedHeader) throws(JOSEError) -> P256.KeyAgreement.PublicKey {
        guard let epk = header.object[Key("epk")] else { throw .malformed("ECDH-ES needs an \"epk\" header") }
        let jwk: JWK
        do {
            jwk = try JWK(json: epk, where: "epk")
        } catch {
            throw .malformed("the epk header is not a valid key: \(error)")
        }
        guard case .ecP256(let point, nil) = jwk.material else {
            throw .malformed("the epk header must be a public EC P-256 key")
        }
        guard let key = try? P256.KeyAgreement.PublicKey(rawRepresentation: point.rawRepresentation) else {
            throw .malformed("the epk header is not a P-256 point")
        }
        return key
    }
}
