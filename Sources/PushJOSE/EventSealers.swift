import PushCore

/// `evt` as a JWS of the event (SPEC §7.3, not encrypted).
public struct SignedEventSealer: EventSealer {
    public let signer: JWSSigner

    public init(signer: JWSSigner) {
        self.signer = signer
    }

    public var payloadKeyID: String? { nil }

    public func seal(_ eventJSON: [UInt8]) throws -> [UInt8] {
        try signer.sign(eventJSON)
    }

    public func sealedLength(eventLength: Int) -> Int? {
        signer.compactLength(payloadLength: eventLength)
    }
}

/// `evt` as a JWE of the event JSON, with an application key (`dir`, `A128KW`, `A256KW`).
public struct EncryptedEventSealer: EventSealer {
    public let encrypter: JWEEncrypter

    public init(encrypter: JWEEncrypter) {
        self.encrypter = encrypter
    }

    public var payloadKeyID: String? { encrypter.kid }

    public func seal(_ eventJSON: [UInt8]) throws -> [UInt8] {
        try encrypter.encrypt(eventJSON)
    }

    public func sealedLength(eventLength: Int) -> Int? {
        encrypter.compactLength(plaintextLength: eventLength)
    }
}

/// `evt` as a JWE, to a device's public key, of the signed JWS of the event (`cty: "JWT"`),
/// so the device can check who sent it (`ECDH-ES`, `ECDH-ES+A256KW`, `RSA-OAEP-256`).
public struct NestedEventSealer: EventSealer {
    public let signer: JWSSigner
    public let encrypter: JWEEncrypter

    public init(signer: JWSSigner, encrypter: JWEEncrypter) {
        self.signer = signer
        self.encrypter = encrypter
    }

    public var payloadKeyID: String? { encrypter.kid }

    public func seal(_ eventJSON: [UInt8]) throws -> [UInt8] {
        try encrypter.encrypt(try signer.sign(eventJSON))
    }

    public func sealedLength(eventLength: Int) -> Int? {
        encrypter.compactLength(plaintextLength: signer.compactLength(payloadLength: eventLength))
    }
}

/// Makes the sealer for a signing key id and an `encryption` block, from an application's
/// key set.
public struct EventSealerFactory: Sendable {
    public let keys: KeyRing

    public init(keys: KeyRing) {
        self.keys = keys
    }

    /// The signer for `kid`, or for the only signing key when `kid` is `nil`.
    public func signer(kid: String?) throws(RequestError) -> JWSSigner {
        let key: JWK
        if let kid {
            guard let found = keys.key(kid: kid, use: .signature) else {
                throw RequestError(.unsupported, "signing: unknown kid \(quote(kid)); the key set's signing keys are \(signingKeyList)")
            }
            key = found
        } else {
            let candidates = keys.signingKeys
            guard candidates.count == 1 else {
                throw candidates.isEmpty
                    ? RequestError(.notConfigured, "signing: the key set has no signing key; add an EC, OKP or HS256 key")
                    : RequestError(.missing, "signing: missing, and the key set has several signing keys (\(signingKeyList)); name one")
            }
            key = candidates[0]
        }
        do {
            return try JWSSigner(key: key)
        } catch {
            throw RequestError(.invalid, "signing: \(error)")
        }
    }

    private var signingKeyList: String {
        let kids = keys.signingKeys.compactMap(\.kid).map(quote)
        return kids.isEmpty ? "(none)" : kids.joined(separator: ", ")
    }

    /// The sealer for a signing key id (`nil`: the only signing key) and an optional
    /// `encryption` block.
    public func sealer(signing: String?, encryption: EncryptionSpec?) throws(RequestError) -> any EventSealer {
        let signer = try signer(kid: signing)
        guard let encryption else { return SignedEventSealer(signer: signer) }
        let encrypter = try encrypter(for: encryption)
        if encrypter.keyAlgorithm.isAsymmetric {
            return NestedEventSealer(signer: signer, encrypter: encrypter)
        }
        return EncryptedEventSealer(encrypter: encrypter)
    }

    /// The encrypter an `encryption` block asks for: the application's key for symmetric
    /// algorithms, the device's public key (`jwk`) for asymmetric ones.
    public func encrypter(for encryption: EncryptionSpec) throws(RequestError) -> JWEEncrypter {
        let keyAlgorithm: JWEKeyAlgorithm
        let content: JWEContentAlgorithm
        do {
            keyAlgorithm = try JWEKeyAlgorithm.named(encryption.alg)
        } catch {
            throw RequestError(.unsupported, "encryption.alg: \(error); expected one of \(JWEKeyAlgorithm.allCases.map { quote($0.rawValue) }.joined(separator: ", "))")
        }
        do {
            content = try JWEContentAlgorithm.named(encryption.enc)
        } catch {
            throw RequestError(.unsupported, "encryption.enc: \(error); expected \"A256GCM\" or \"A128GCM\"")
        }
        if keyAlgorithm.isAsymmetric {
            guard let jwkJSON = encryption.jwk else {
                throw RequestError(.missing, "encryption.jwk: missing; \(keyAlgorithm.rawValue) encrypts to the device's public key")
            }
            let deviceKey: JWK
            do {
                deviceKey = try JWK(json: jwkJSON, where: "encryption.jwk")
            } catch {
                throw RequestError(.invalid, "\(error)")
            }
            guard let kid = encryption.kid ?? deviceKey.kid else {
                throw RequestError(.missing, "encryption.kid: missing, and the jwk has no kid; the payload must name the key")
            }
            do {
                return try JWEEncrypter(
                    keyAlgorithm: keyAlgorithm, contentAlgorithm: content, key: deviceKey, kid: kid, contentType: "JWT")
            } catch {
                throw RequestError(.invalid, "encryption: \(error)")
            }
        }
        if encryption.jwk != nil {
            throw RequestError(.invalid, "encryption.jwk: \(keyAlgorithm.rawValue) uses the application's key named by kid; remove jwk")
        }
        guard let kid = encryption.kid else {
            throw RequestError(.missing, "encryption.kid: missing; name the application's \(keyAlgorithm.rawValue) key")
        }
        guard let key = keys.key(kid: kid, use: .encryption) else {
            throw RequestError(.unsupported, "encryption.kid: unknown kid \(quote(kid)) in the key set")
        }
        do {
            return try JWEEncrypter(keyAlgorithm: keyAlgorithm, contentAlgorithm: content, key: key, kid: kid)
        } catch {
            throw RequestError(.invalid, "encryption: \(error)")
        }
    }
}
