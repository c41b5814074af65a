import PushCore
import PushJSON

/// What a key is used for.
public enum KeyUse: String, Sendable {
    case signature = "sig"
    case encryption = "enc"
}

/// A set of keys found by `kid` and use: the signing keys and symmetric encryption keys of an
/// application (a JWK Set, RFC 7517 §5), or the private keys of a device for `decode`.
public struct KeyRing: Sendable {
    /// The keys in the order given.
    public let keys: [JWK]

    public init(_ keys: [JWK]) throws(JOSEError) {
        for (index, key) in keys.enumerated() {
            guard let kid = key.kid else { continue }
            for other in keys[..<index] where other.kid == kid && (other.use == nil || key.use == nil || other.use == key.use) {
                throw .invalidKey("kid \(quote(kid)) is used by two keys for the same use; give each key its own kid")
            }
        }
        self.keys = keys
    }

    /// Reads a JWK Set: `{"keys":[…]}`.
    public init(jwkSet json: JSON) throws(JOSEError) {
        guard case .object(let object) = json, case .array(let elements)? = object[Key("keys")] else {
            throw .invalidKey("a JWK Set is an object with a \"keys\" array")
        }
        var keys: [JWK] = []
        for (index, element) in elements.enumerated() {
            keys.append(try JWK(json: element, where: "keys[\(index)]"))
        }
        try self.init(keys)
    }

    /// Reads a JWK Set from its JSON text.
    public init(jwkSetText bytes: [UInt8]) throws(JOSEError) {
        let json: JSON
        do {
            json = try JSONParser.parseRejectingDuplicateKeys(bytes)
        } catch {
            throw .invalidKey("the JWK Set is not valid JSON: \(error)")
        }
        try self.init(jwkSet: json)
    }

    /// The key with this id that may serve `use` (its `use` member, if any, must agree).
    public func key(kid: String, use: KeyUse? = nil) -> JWK? {
        keys.first { $0.kid == kid && (use == nil || $0.use == nil || $0.use == use?.rawValue) }
    }

    /// The keys that can sign: private EC/OKP keys, and secret keys meant for HS256.
    public var signingKeys: [JWK] {
        keys.filter { key in
            if let use = key.use, use != KeyUse.signature.rawValue { return false }
            switch key.material {
            case .ecP256(_, let privateKey): return privateKey != nil
            case .ed25519(_, let privateKey): return privateKey != nil
            case .octet: return key.use == KeyUse.signature.rawValue || key.alg == "HS256"
            case .rsa: return false  // RS256 verifies only
            }
        }
    }
}
