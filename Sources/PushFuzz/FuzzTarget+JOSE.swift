import PushCore
import PushJOSE
import PushJSON

extension FuzzTarget {
    /// `jose`: JWK, JWK Sets, JWS and JWE (compact), and the payload decoder (PushJOSE). The
    /// first byte chooses:
    ///
    /// - 0: the rest is a JWK. Refused: a bounded message that echoes none of the key's secret
    ///   members. Accepted: its private and public JWKs read back to the same key (thumbprint
    ///   and members).
    /// - 1: the rest is a JWK Set: the same for its refusals.
    /// - 2: the rest is a token, verified as a JWS, decrypted as a JWE and decoded as a data
    ///   payload with the test key set: refusals bounded, none echoing the signature part.
    /// - 3: the rest is a payload, signed with one of the set's signing keys (the second byte
    ///   chooses): it verifies, to the same payload, at the length announced.
    /// - 4: the rest is a plaintext, encrypted with one of the set's algorithm and key pairs:
    ///   it decrypts to the same plaintext, at the length announced.
    public static func jose(_ data: UnsafeBufferPointer<UInt8>) throws(FuzzViolation) {
        var input = FuzzInput(data)
        let mode = input.byte() % 5
        switch mode {
        case 0: try joseKey(input.rest)
        case 1: try joseKeySet(input.rest)
        case 2: try joseToken(input.rest)
        case 3: try joseSign(choice: Int(input.byte()), payload: input.rest)
        default: try joseEncrypt(choice: Int(input.byte()), plaintext: input.rest)
        }
    }

    /// The test key set (fixtures/jose/test-keyset.json).
    static let joseKeys: KeyRing = {
        do {
            return try KeyRing(jwkSetText: Array(FuzzKeys.keySetText.utf8))
        } catch {
            fatalError("the embedded test key set does not read: \(error)")
        }
    }()

    /// The members of a JWK that are secret.
    static let secretMembers = ["d", "k", "p", "q", "dp", "dq", "qi"]

    /// The secret members' texts anywhere in `json`, but those whose text also occurs elsewhere
    /// in the input (another member may hold it, and be echoed).
    static func secrets(in json: JSON?, input: [UInt8]) -> [String] {
        secrets(in: json).filter { secret in
            let needle = Array(secret.utf8)
            guard !needle.isEmpty, needle.count <= input.count else { return false }
            var count = 0
            for start in 0...(input.count - needle.count) where input[start] == needle[0] && input[start..<(start + needle.count)].elementsEqual(needle) {
                count += 1
            }
            return count == 1
        }
    }

    /// The secret members' texts anywhere in `json`.
    static func secrets(in json: JSON?) -> [String] {
        var found: [String] = []
        func walk(_ value: JSON, depth: Int) {
            guard depth < 16 else { return }
            switch value {
            case .object(let object):
                for (key, member) in object {
                    if secretMembers.contains(key.string), case .string(let text) = member { found.append(text) }
                    walk(member, depth: depth + 1)
                }
            case .array(let elements):
                for element in elements { walk(element, depth: depth + 1) }
            default:
                break
            }
        }
        if let json { walk(json, depth: 0) }
        return found
    }

    static func joseKey(_ bytes: [UInt8]) throws(FuzzViolation) {
        guard let json = try? JSONParser.parse(bytes) else { return }
        let key: JWK
        do {
            key = try JWK(json: json)
        } catch {
            try Check.message(error.description, "a JWK's error")
            for secret in secrets(in: json, input: bytes) { try Check.doesNotEcho(error.description, secret: secret, "a JWK's error") }
            return
        }
        let thumbprint = key.thumbprint
        do {
            let again = try JWK(json: key.privateJSON)
            try Check.that(again.thumbprint == thumbprint, "a JWK read back from its privateJSON has another thumbprint")
            try Check.that(again.privateJSON == key.privateJSON, "a JWK's privateJSON does not read back to itself")
            if let publicJSON = key.publicJSON {
                let publicKey = try JWK(json: publicJSON)
                try Check.that(publicKey.thumbprint == thumbprint, "a JWK's public part has another thumbprint")
                try Check.that(!publicKey.isPrivate, "a JWK's publicJSON holds a private key")
                for secret in secrets(in: json) { try Check.doesNotEcho(publicJSON.description, secret: secret, "a JWK's publicJSON") }
            }
        } catch let violation as FuzzViolation {
            throw violation
        } catch {
            throw FuzzViolation("an accepted JWK does not read back from what it writes (\(error)): \(Check.excerpt(bytes))")
        }
    }

    static func joseKeySet(_ bytes: [UInt8]) throws(FuzzViolation) {
        do {
            _ = try KeyRing(jwkSetText: bytes)
        } catch {
            try Check.message(error.description, "a JWK Set's error")
            for secret in secrets(in: try? JSONParser.parse(bytes), input: bytes) { try Check.doesNotEcho(error.description, secret: secret, "a JWK Set's error") }
        }
    }

    static func joseToken(_ bytes: [UInt8]) throws(FuzzViolation) {
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        let signature = parts.count == 3 ? String(decoding: parts[2], as: UTF8.self) : ""
        switch Result(catching: { () throws(JOSEError) in try JWS.verify(bytes, keys: joseKeys) }) {
        case .success(let verified):
            try Check.that(verified.kid != nil, "a JWS verified without a kid")
        case .failure(let error):
            try Check.message(error.description, "a JWS's error")
            try Check.doesNotEcho(error.description, secret: signature, "a JWS's error")
        }
        do {
            _ = try JWE.decrypt(bytes, keys: joseKeys)
        } catch {
            try Check.message(error.description, "a JWE's error")
            if parts.count == 5 {
                try Check.doesNotEcho(error.description, secret: String(decoding: parts[3], as: UTF8.self), "a JWE's error (its ciphertext)")
            }
        }
        do {
            _ = try PayloadDecoder(keys: joseKeys).decode(bytes)
        } catch {
            try Check.message("\(error)", "the payload decoder's error")
        }
    }

    static func joseSign(choice: Int, payload: [UInt8]) throws(FuzzViolation) {
        let keys = joseKeys.signingKeys
        let key = keys[choice % keys.count]
        do {
            let signer = try JWSSigner(key: key)
            let token = try signer.sign(payload)
            try Check.that(token.count == signer.compactLength(payloadLength: payload.count), "a JWS of \(token.count) bytes where \(signer.compactLength(payloadLength: payload.count)) were announced")
            let verified = try JWS.verify(token, keys: joseKeys)
            try Check.that(verified.payload == payload, "a JWS verifies to another payload")
            try Check.that(verified.kid == key.kid, "a JWS verifies with another kid")
        } catch let violation as FuzzViolation {
            throw violation
        } catch {
            throw FuzzViolation("signing with \(key.kid ?? "?") and verifying failed: \(error)")
        }
    }

    /// Algorithm, content encryption and key id of the set's encryption keys.
    static let josePairs: [(JWEKeyAlgorithm, JWEContentAlgorithm, String)] = [
        (.direct, .a256gcm, "enc-dir"), (.direct, .a128gcm, "enc-dir128"), (.a256kw, .a256gcm, "enc-kw"), (.a128kw, .a128gcm, "enc-kw128"),
        (.a256kw, .a128gcm, "enc-kw"), (.ecdhES, .a256gcm, "dev-ec"), (.ecdhESA256KW, .a128gcm, "dev-ec"), (.rsaOAEP256, .a256gcm, "dev-rsa"),
    ]

    static func joseEncrypt(choice: Int, plaintext: [UInt8]) throws(FuzzViolation) {
        let (algorithm, content, kid) = josePairs[choice % josePairs.count]
        guard let key = joseKeys.key(kid: kid, use: .encryption) else { throw FuzzViolation("the test key set has no key \(kid)") }
        do {
            let encrypter = try JWEEncrypter(keyAlgorithm: algorithm, contentAlgorithm: content, key: key)
            let token = try encrypter.encrypt(plaintext)
            try Check.that(token.count == encrypter.compactLength(plaintextLength: plaintext.count), "a JWE of \(token.count) bytes where \(encrypter.compactLength(plaintextLength: plaintext.count)) were announced")
            let decrypted = try JWE.decrypt(token, keys: joseKeys)
            try Check.that(decrypted.plaintext == plaintext, "a JWE decrypts to another plaintext")
        } catch let violation as FuzzViolation {
            throw violation
        } catch {
            throw FuzzViolation("encrypting with \(algorithm.rawValue)/\(content.rawValue) to \(kid) and decrypting failed: \(error)")
        }
    }
}
