import Crypto
import CryptoExtras
import PushCore
import PushJSON

/// Signature algorithms (RFC 7518 §3, RFC 8037).
public enum JWSAlgorithm: String, Sendable, CaseIterable {
    case es256 = "ES256"
    case hs256 = "HS256"
    case edDSA = "EdDSA"
    /// Verification only: identity providers sign bearer tokens with RS256; we never do.
    case rs256 = "RS256"

    /// Bytes of a signature (RS256: the modulus length; 256 for 2048-bit keys).
    public var signatureLength: Int {
        switch self {
        case .es256, .edDSA: return 64
        case .hs256: return 32
        case .rs256: return 256
        }
    }

    /// The algorithm named in a header; `none` and anything else unknown are refused.
    public static func named(_ name: String) throws(JOSEError) -> JWSAlgorithm {
        guard let algorithm = JWSAlgorithm(rawValue: name) else { throw JOSEError(.unsupportedAlgorithm(name)) }
        return algorithm
    }

    /// The algorithm a key signs with when none is named: its `alg`, else by key type.
    public static func forKey(_ key: JWK) throws(JOSEError) -> JWSAlgorithm {
        if let alg = key.alg { return try named(alg) }
        switch key.material {
        case .ecP256: return .es256
        case .ed25519: return .edDSA
        case .octet: return .hs256
        case .rsa: return .rs256
        }
    }

    /// Checks that `key` can be used with this algorithm (to sign when `signing`, else to verify).
    func check(_ key: JWK, signing: Bool) throws(JOSEError) {
        if let alg = key.alg, alg != rawValue {
            throw .mismatch("\(key.label) is for \(quote(alg)), not \(rawValue)")
        }
        if key.use == KeyUse.encryption.rawValue {
            throw .mismatch("\(key.label) is an encryption key (use \"enc\"), not a signing key")
        }
        switch (self, key.material) {
        case (.es256, .ecP256(_, let privateKey)):
            if signing && privateKey == nil { throw .mismatch("\(key.label) has no private part (d) to sign with") }
        case (.edDSA, .ed25519(_, let privateKey)):
            if signing && privateKey == nil { throw .mismatch("\(key.label) has no private part (d) to sign with") }
        case (.hs256, .octet(let secret)):
            if secret.bitCount < 256 {
                throw .mismatch("\(key.label) is too short for HS256: at least 256 bits (RFC 7518 §3.2)")
            }
        case (.rs256, .rsa):
            if signing { throw .mismatch("RS256 is accepted to verify bearer tokens only; sign with ES256, HS256 or EdDSA") }
        default:
            throw .mismatch("\(rawValue) needs \(requiredKey), and \(key.label) is not one")
        }
    }

    var requiredKey: String {
        switch self {
        case .es256: return "an EC P-256 key"
        case .edDSA: return "an OKP Ed25519 key"
        case .hs256: return "an oct key"
        case .rs256: return "an RSA key"
        }
    }
}

/// Signs payloads with one key as compact JWS (RFC 7515 §7.1). The protected header is
/// `{"alg":…,"kid":…}`, encoded once.
public struct JWSSigner: Sendable {
    public let algorithm: JWSAlgorithm
    public let key: JWK
    let encodedHeader: [UInt8]

    public init(key: JWK, algorithm: JWSAlgorithm? = nil) throws(JOSEError) {
        let chosen: JWSAlgorithm
        if let algorithm {
            chosen = algorithm
        } else {
            chosen = try JWSAlgorithm.forKey(key)
        }
        try chosen.check(key, signing: true)
        self.algorithm = chosen
        self.key = key
        var header = JSONWriter(capacity: 64)
        header.raw("{\"alg\":")
        header.writeString(chosen.rawValue)
        if let kid = key.kid {
            header.raw(",\"kid\":")
            header.writeString(kid)
        }
        header.raw("}")
        encodedHeader = Base64URL.encode(header.bytes)
    }

    /// Length of the compact JWS of a payload of `payloadLength` bytes.
    public func compactLength(payloadLength: Int) -> Int {
        encodedHeader.count + 1 + Base64URL.encodedLength(payloadLength) + 1
            + Base64URL.encodedLength(algorithm.signatureLength)
    }

    /// The compact JWS of `payload`.
    public func sign(_ payload: [UInt8]) throws(JOSEError) -> [UInt8] {
        var token: [UInt8] = []
        token.reserveCapacity(compactLength(payloadLength: payload.count))
        token.append(contentsOf: encodedHeader)
        token.append(UInt8(ascii: "."))
        payload.withUnsafeBytes { Base64URL.encode($0, into: &token) }
        let signature: [UInt8]
        do {
            switch key.material {
            case .ecP256(_, let privateKey?):
                signature = [UInt8](try privateKey.signature(for: token).rawRepresentation)
            case .ed25519(_, let privateKey?):
                signature = [UInt8](try privateKey.signature(for: token))
            case .octet(let secret):
                signature = Array(HMAC<SHA256>.authenticationCode(for: token, using: secret))
            default:
                throw JOSEError.mismatch("\(key.label) cannot sign")
            }
        } catch let error as JOSEError {
            throw error
        } catch {
            throw .mismatch("signing with \(key.label) failed: \(error)")
        }
        token.append(UInt8(ascii: "."))
        signature.withUnsafeBytes { Base64URL.encode($0, into: &token) }
        return token
    }
}

/// Verification of compact JWS.
public enum JWS {
    public struct Verified: Sendable {
        public let payload: [UInt8]
        public let algorithm: JWSAlgorithm
        public let kid: String?
        public let header: JSONObject
    }

    /// Verifies `token` with the key its header names (`kid`) in `keys`.
    public static func verify(_ token: [UInt8], keys: KeyRing) throws(JOSEError) -> Verified {
        try verify(token) { header throws(JOSEError) in
            guard let kid = header.kid else {
                throw .malformed("the JWS header has no kid, so no key can be chosen")
            }
            guard let key = keys.key(kid: kid, use: .signature) else { throw JOSEError(.unknownKeyID(kid)) }
            return key
        }
    }

    /// Verifies `token` with `key`.
    public static func verify(_ token: [UInt8], key: JWK) throws(JOSEError) -> Verified {
        try verify(token) { _ throws(JOSEError) in key }
    }

    static func verify(_ token: [UInt8], keyFor: (ProtectedHeader) throws(JOSEError) -> JWK) throws(JOSEError) -> Verified {
        let parts = try CompactParts(token, expected: 3, kind: "JWS")
        let header = try ProtectedHeader(encoded: parts[0])
        let algorithm = try JWSAlgorithm.named(try header.requiredString("alg"))
        try header.rejectUnsupported(["crit", "b64", "zip"])
        // A kid of another type is refused, not taken as no kid (which chooses a key).
        _ = try header.string("kid")
        let key = try keyFor(header)
        try algorithm.check(key, signing: false)
        guard let signature = Base64URL.decode(parts[2]) else {
            throw .malformed("the JWS signature is not base64url")
        }
        guard let payload = Base64URL.decode(parts[1]) else {
            throw .malformed("the JWS payload is not base64url")
        }
        let signingInput = Array(token[parts[0].startIndex..<parts[1].endIndex])
        let valid: Bool
        switch key.material {
        case .ecP256(let publicKey, _):
            guard signature.count == 64, let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else {
                throw JOSEError(.badSignature)
            }
            valid = publicKey.isValidSignature(ecdsa, for: signingInput)
        case .ed25519(let publicKey, _):
            valid = publicKey.isValidSignature(signature, for: signingInput)
        case .octet(let secret):
            // Constant-time comparison of the MAC.
            valid = HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signingInput, using: secret)
        case .rsa(let rsa):
            valid = rsa.signingPublicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: signingInput, padding: .insecurePKCS1v1_5)
        }
        guard valid else { throw JOSEError(.badSignature) }
        return Verified(payload: payload, algorithm: algorithm, kid: header.kid, header: header.object)
    }
}

/// The parts of a compact serialisation, split on `.`.
struct CompactParts {
    let parts: [ArraySlice<UInt8>]

    init(_ token: [UInt8], expected: Int, kind: String) throws(JOSEError) {
        let parts = token.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == expected else {
            throw .malformed("a compact \(kind) has \(expected) parts separated by '.', this has \(parts.count)")
        }
        self.parts = parts
    }

    subscript(index: Int) -> ArraySlice<UInt8> { parts[index] }
}

/// A decoded protected header.
struct ProtectedHeader {
    let object: JSONObject

    init(encoded: ArraySlice<UInt8>) throws(JOSEError) {
        guard let bytes = Base64URL.decode(encoded) else {
            throw .malformed("the protected header is not base64url")
        }
        let json: JSON
        do {
            json = try JSONParser.parseRejectingDuplicateKeys(bytes)
        } catch {
            throw .malformed("the protected header is not JSON (\(error))")
        }
        guard case .object(let object) = json else {
            throw .malformed("the protected header is not a JSON object")
        }
        self.object = object
    }

    func string(_ name: String) throws(JOSEError) -> String? {
        guard let value = object[Key(name)] else { return nil }
        guard case .string(let text) = value else {
            throw .malformed("header \(quote(name)) must be a string, got \(value.typeName)")
        }
        return text
    }

    func requiredString(_ name: String) throws(JOSEError) -> String {
        guard let text = try string(name) else { throw .malformed("the header has no \(quote(name))") }
        return text
    }

    var kid: String? { (try? string("kid")) ?? nil }

    /// Refuses headers we do not implement (whose meaning would change the result).
    func rejectUnsupported(_ names: [String]) throws(JOSEError) {
        for name in names where object[Key(name)] != nil {
            throw .malformed("header \(quote(name)) is not supported")
        }
    }
}
