import Crypto
import CryptoExtras
import PushCore
import PushJSON

/// A JSON Web Key (RFC 7517): EC P-256, OKP Ed25519, RSA or an octet sequence.
public struct JWK: Sendable {
    public enum Material: Sendable {
        case ecP256(public: P256.Signing.PublicKey, private: P256.Signing.PrivateKey?)
        case ed25519(public: Curve25519.Signing.PublicKey, private: Curve25519.Signing.PrivateKey?)
        case rsa(RSAKey)
        case octet(SymmetricKey)
    }

    /// An RSA key: the public part, the private part when present, and the JWK numbers.
    ///
    /// `@unchecked Sendable`: swift-crypto's RSA key types wrap an immutable BoringSSL `RSA`
    /// object, whose operations are safe from several threads at once (BoringSSL locks the
    /// lazily built blinding and Montgomery state), but do not declare `Sendable`.
    public struct RSAKey: @unchecked Sendable {
        public let publicKey: _RSA.Encryption.PublicKey
        public let privateKey: _RSA.Encryption.PrivateKey?
        /// The same public key, for RS256 verification.
        public let signingPublicKey: _RSA.Signing.PublicKey
        /// Big-endian modulus and exponent, as in the JWK's `n` and `e`.
        public let modulus: [UInt8]
        public let exponent: [UInt8]
        /// The private members as given (`d`, `p`, `q`, …), to write the key back out.
        let privateMembers: [(String, [UInt8])]
    }

    /// `kid`: the key id.
    public let kid: String?
    /// `use`: `sig` or `enc`, when given.
    public let use: String?
    /// `alg`: the algorithm the key is meant for, when given.
    public let alg: String?
    public let material: Material

    public init(material: Material, kid: String? = nil, use: String? = nil, alg: String? = nil) {
        self.material = material
        self.kid = kid
        self.use = use
        self.alg = alg
    }

    /// Whether the key holds a private (or secret) part.
    public var isPrivate: Bool {
        switch material {
        case .ecP256(_, let privateKey): return privateKey != nil
        case .ed25519(_, let privateKey): return privateKey != nil
        case .rsa(let key): return key.privateKey != nil
        case .octet: return true
        }
    }

    /// `kty` of the key.
    public var keyType: String {
        switch material {
        case .ecP256: return "EC"
        case .ed25519: return "OKP"
        case .rsa: return "RSA"
        case .octet: return "oct"
        }
    }

    /// A short description for messages: `EC P-256 key "sig-1"`.
    public var label: String {
        let kind: String
        switch material {
        case .ecP256: kind = "EC P-256"
        case .ed25519: kind = "OKP Ed25519"
        case .rsa(let key): kind = "RSA-\(key.publicKey.keySizeInBits)"
        case .octet(let key): kind = "oct (\(key.bitCount) bits)"
        }
        return kid.map { "\(kind) key \(quote($0))" } ?? "\(kind) key"
    }

    // MARK: - Reading

    /// Reads a JWK from its JSON object; `where` names it in messages.
    public init(json: JSON, where location: String = "JWK") throws(JOSEError) {
        guard case .object(let object) = json else {
            throw .invalidKey("\(location): expected a JSON object, got \(json.typeName)")
        }
        func string(_ name: String) throws(JOSEError) -> String? {
            guard let value = object[Key(name)], !value.isNull else { return nil }
            guard case .string(let text) = value else {
                throw .invalidKey("\(location).\(name): expected a string, got \(value.typeName)")
            }
            return text
        }
        func bytes(_ name: String, required: Bool = true) throws(JOSEError) -> [UInt8]? {
            guard let text = try string(name) else {
                if required { throw .invalidKey("\(location): missing \(quote(name))") }
                return nil
            }
            guard let decoded = Base64URL.decode(text) else {
                throw .invalidKey("\(location).\(name): not base64url without padding")
            }
            return decoded
        }
        guard let kty = try string("kty") else {
            throw .invalidKey("\(location): missing \"kty\"; expected \"EC\", \"OKP\", \"RSA\" or \"oct\"")
        }
        kid = try string("kid")
        use = try string("use")
        alg = try string("alg")
        if let use, use != "sig" && use != "enc" {
            throw .invalidKey("\(location).use: expected \"sig\" or \"enc\", got \(quote(use))")
        }
        let name = kid.map { "\(location) \(quote($0))" } ?? location
        switch kty {
        case "EC":
            let crv = try string("crv")
            guard crv == "P-256" else {
                throw .invalidKey("\(name): curve \(quote(crv ?? "(none)")) is not supported; expected \"P-256\"")
            }
            let x = try bytes("x")!, y = try bytes("y")!
            guard x.count == 32, y.count == 32 else {
                throw .invalidKey("\(name): x and y must be 32 bytes each for P-256")
            }
            let publicKey: P256.Signing.PublicKey
            do {
                publicKey = try P256.Signing.PublicKey(rawRepresentation: x + y)
            } catch {
                throw .invalidKey("\(name): x, y is not a point on P-256")
            }
            var privateKey: P256.Signing.PrivateKey?
            if let d = try bytes("d", required: false) {
                guard d.count == 32, let key = try? P256.Signing.PrivateKey(rawRepresentation: d) else {
                    throw .invalidKey("\(name): d is not a P-256 private key")
                }
                guard key.publicKey.rawRepresentation == publicKey.rawRepresentation else {
                    throw .invalidKey("\(name): d does not match x, y")
                }
                privateKey = key
            }
            material = .ecP256(public: publicKey, private: privateKey)
        case "OKP":
            let crv = try string("crv")
            guard crv == "Ed25519" else {
                throw .invalidKey("\(name): curve \(quote(crv ?? "(none)")) is not supported; expected \"Ed25519\"")
            }
            let x = try bytes("x")!
            guard x.count == 32, let publicKey = try? Curve25519.Signing.PublicKey(rawRepresentation: x) else {
                throw .invalidKey("\(name): x is not an Ed25519 public key")
            }
            var privateKey: Curve25519.Signing.PrivateKey?
            if let d = try bytes("d", required: false) {
                guard d.count == 32, let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: d) else {
                    throw .invalidKey("\(name): d is not an Ed25519 private key")
                }
                guard key.publicKey.rawRepresentation == publicKey.rawRepresentation else {
                    throw .invalidKey("\(name): d does not match x")
                }
                privateKey = key
            }
            material = .ed25519(public: publicKey, private: privateKey)
        case "RSA":
            let n = try bytes("n")!, e = try bytes("e")!
            // RFC 7518 §6.3.1: the minimum number of octets. A leading zero would give the same
            // key another thumbprint (and another identity when keys are compared).
            guard n.first != 0, e.first != 0, !n.isEmpty, !e.isEmpty else {
                throw .invalidKey("\(name): n and e are written with the minimum number of octets (no leading zero)")
            }
            let publicKey: _RSA.Encryption.PublicKey
            let signingPublicKey: _RSA.Signing.PublicKey
            do {
                publicKey = try _RSA.Encryption.PublicKey(n: n, e: e)
                signingPublicKey = try _RSA.Signing.PublicKey(n: n, e: e)
            } catch {
                throw .invalidKey("\(name): n, e is not an RSA public key (at least 2048 bits)")
            }
            var privateKey: _RSA.Encryption.PrivateKey?
            var privateMembers: [(String, [UInt8])] = []
            if let d = try bytes("d", required: false) {
                guard let p = try bytes("p", required: false), let q = try bytes("q", required: false) else {
                    throw .invalidKey("\(name): an RSA private key needs p and q as well as d")
                }
                do {
                    privateKey = try _RSA.Encryption.PrivateKey(n: n, e: e, d: d, p: p, q: q)
                } catch {
                    throw .invalidKey("\(name): n, e, d, p, q is not a consistent RSA private key")
                }
                privateMembers = [("d", d), ("p", p), ("q", q)]
                for member in ["dp", "dq", "qi"] {
                    if let value = try bytes(member, required: false) { privateMembers.append((member, value)) }
                }
            }
            material = .rsa(
                RSAKey(
                    publicKey: publicKey, privateKey: privateKey, signingPublicKey: signingPublicKey, modulus: n, exponent: e,
                    privateMembers: privateMembers))
        case "oct":
            let k = try bytes("k")!
            guard !k.isEmpty else { throw .invalidKey("\(name): k is empty") }
            material = .octet(SymmetricKey(data: k))
        default:
            throw .invalidKey("\(name): kty \(quote(kty)) is not supported; expected \"EC\", \"OKP\", \"RSA\" or \"oct\"")
        }
    }

    // MARK: - Writing

    /// The public key as a JWK (no private members); `nil` for a symmetric key.
    public var publicJSON: JSON? {
        if case .octet = material { return nil }
        return json(includingPrivate: false)
    }

    /// The whole key as a JWK, private members included.
    public var privateJSON: JSON {
        json(includingPrivate: true)
    }

    private func json(includingPrivate: Bool) -> JSON {
        var members: [(Key, JSON)] = [(Key("kty"), .string(keyType))]
        func add(_ name: String, _ value: String?) {
            if let value { members.append((Key(name), .string(value))) }
        }
        func add(_ name: String, bytes: [UInt8]) {
            members.append((Key(name), .string(Base64URL.encodeToString(bytes))))
        }
        add("kid", kid)
        add("use", use)
        add("alg", alg)
        switch material {
        case .ecP256(let publicKey, let privateKey):
            let raw = [UInt8](publicKey.rawRepresentation)
            add("crv", "P-256")
            add("x", bytes: Array(raw[0..<32]))
            add("y", bytes: Array(raw[32..<64]))
            if includingPrivate, let privateKey { add("d", bytes: [UInt8](privateKey.rawRepresentation)) }
        case .ed25519(let publicKey, let privateKey):
            add("crv", "Ed25519")
            add("x", bytes: [UInt8](publicKey.rawRepresentation))
            if includingPrivate, let privateKey { add("d", bytes: [UInt8](privateKey.rawRepresentation)) }
        case .rsa(let key):
            add("n", bytes: key.modulus)
            add("e", bytes: key.exponent)
            if includingPrivate {
                for (name, value) in key.privateMembers { add(name, bytes: value) }
            }
        case .octet(let key):
            add("k", bytes: key.withUnsafeBytes { Array($0) })
        }
        return .object(JSONObject(members))
    }

    /// The RFC 7638 thumbprint: base64url of SHA-256 over the required members in
    /// lexicographic order, compact.
    public var thumbprint: String {
        var members: [(Key, JSON)]
        switch material {
        case .ecP256(let publicKey, _):
            let raw = [UInt8](publicKey.rawRepresentation)
            members = [
                ("crv", "P-256"), ("kty", "EC"), ("x", .string(Base64URL.encodeToString(raw[0..<32]))),
                ("y", .string(Base64URL.encodeToString(raw[32..<64]))),
            ]
        case .ed25519(let publicKey, _):
            members = [("crv", "Ed25519"), ("kty", "OKP"), ("x", .string(Base64URL.encodeToString(publicKey.rawRepresentation)))]
        case .rsa(let key):
            members = [
                ("e", .string(Base64URL.encodeToString(key.exponent))), ("kty", "RSA"),
                ("n", .string(Base64URL.encodeToString(key.modulus))),
            ]
        case .octet(let key):
            members = [("k", .string(Base64URL.encodeToString(key.withUnsafeBytes { Array($0) }))), ("kty", "oct")]
        }
        let canonical = JSON.object(JSONObject(members)).description
        return Base64URL.encodeToString(SHA256.hash(data: Array(canonical.utf8)))
    }

    /// This key with another `kid`, `use` or `alg`.
    public func with(kid: String? = nil, use: String? = nil, alg: String? = nil) -> JWK {
        JWK(material: material, kid: kid ?? self.kid, use: use ?? self.use, alg: alg ?? self.alg)
    }
}
