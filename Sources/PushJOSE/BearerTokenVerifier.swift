import PushCore
import PushJSON

/// Verifies the bearer tokens of the REST API (SPEC §5, §11.10): a JWT signed with the
/// application's HS256 secret or one of the keys of its JWK Set, within its `exp` / `nbf`
/// (with a small leeway), optionally with a given `iss` and `aud`; its subject is `sub` or,
/// failing that, a `uid` claim.
public struct BearerTokenVerifier: Sendable {
    /// Why a token is refused; each answers 401.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    public let keys: KeyRing
    public let issuer: String?
    public let audience: String?
    /// Seconds of tolerance on `exp` (a token expired this long ago still passes). `nbf` is
    /// checked without tolerance (SPEC §11.10).
    public let leeway: Int64

    public init(keys: KeyRing, issuer: String? = nil, audience: String? = nil, leeway: Int64 = 60) {
        self.keys = keys
        self.issuer = issuer
        self.audience = audience
        self.leeway = Swift.max(0, leeway)
    }

    /// A verifier for tokens signed with an HS256 secret, used as its UTF-8 bytes.
    public static func hs256(secret: String, issuer: String? = nil, audience: String? = nil, leeway: Int64 = 60) throws(JOSEError)
        -> BearerTokenVerifier
    {
        let key = try JWK(json: ["kty": "oct", "alg": "HS256", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        _ = try JWSSigner(key: key)  // refuses secrets shorter than 256 bits
        return BearerTokenVerifier(keys: try KeyRing([key]), issuer: issuer, audience: audience, leeway: leeway)
    }

    /// The subject of a valid token.
    public func subject(of token: String, now: Int64) throws(Failure) -> String {
        try verify(token, now: now).subject
    }

    /// The subject and the verified claims (a JSON object) of a valid token.
    public func verify(_ token: String, now: Int64) throws(Failure) -> (subject: String, claims: JSON) {
        let bytes = Array(token.utf8)
        let verified: JWS.Verified
        do {
            verified = try JWS.verify(bytes) { header throws(JOSEError) in
                if let kid = header.kid {
                    guard let key = keys.key(kid: kid, use: .signature) else { throw JOSEError(.unknownKeyID(kid)) }
                    return key
                }
                // A token without kid: the application's only key, if it has one.
                let candidates = keys.keys.filter { $0.use != KeyUse.encryption.rawValue }
                guard candidates.count == 1 else {
                    throw JOSEError.malformed("the token has no kid and the application has several keys")
                }
                return candidates[0]
            }
        } catch {
            throw Failure("the token does not verify: \(error)")
        }
        let claims: JSONObject
        do {
            guard case .object(let object) = try JSONParser.parseRejectingDuplicateKeys(verified.payload) else {
                throw Failure("the token's claims are not a JSON object")
            }
            claims = object
        } catch let failure as Failure {
            throw failure
        } catch {
            // A repeated claim is refused (which one counts would be a guess): the error names it.
            throw Failure("the token's claims are not JSON with each claim once: \(error)")
        }
        guard let exp = claims[Key("exp")] else { throw Failure("the token has no exp claim") }
        guard let expires = exp.secondsClaim else { throw Failure("exp is not a number of seconds") }
        // Claims are any numbers a signer chose: the arithmetic saturates instead of trapping.
        if now > expires.saturatingAdding(leeway) { throw Failure("the token expired at \(expires) (now \(now))") }
        if let nbf = claims[Key("nbf")] {
            guard let notBefore = nbf.secondsClaim else { throw Failure("nbf is not a number of seconds") }
            // SPEC §11.10: a token whose nbf is in the future is refused (the leeway is for exp).
            if now < notBefore { throw Failure("the token is not valid before \(notBefore) (now \(now))") }
        }
        if let issuer {
            guard claims[Key("iss")]?.stringValue == issuer else { throw Failure("the token's iss is not \(quote(issuer))") }
        }
        if let audience {
            let aud = claims[Key("aud")]
            let audiences = aud?.stringValue.map { [$0] } ?? aud?.arrayValue?.compactMap(\.stringValue) ?? []
            guard audiences.contains(audience) else { throw Failure("the token's aud does not include \(quote(audience))") }
        }
        // The subject is `sub`, or `uid` when there is no `sub`; a claim of another type is
        // refused, never passed over for the other one.
        var subject: String?
        for name in ["sub", "uid"] {
            guard let claim = claims[Key(name)] else { continue }
            guard let text = claim.stringValue else { throw Failure("the token's \(name) claim is \(claim.typeName), not a string") }
            subject = text
            break
        }
        guard let subject, !subject.isEmpty else { throw Failure("the token has no subject (sub or uid claim)") }
        return (subject, .object(claims))
    }
}

extension JSON {
    /// A NumericDate claim (RFC 7519 §2) in whole seconds: an integer as it is, a fraction
    /// rounded down, a double beyond the Int64 range clamped to it; `nil` when not a number.
    var secondsClaim: Int64? {
        switch self {
        case .int(let value):
            return value
        case .double(let value):
            let down = value.rounded(.down)
            if down >= 9.223372036854775807e18 { return .max }
            if down <= -9.223372036854775808e18 { return .min }
            return Int64(down)
        default:
            return nil
        }
    }
}

extension EventSealerFactory {
    /// Checks a subscription's `encryption` block against the application's keys (SPEC §5):
    /// supported `alg` and `enc`; symmetric algorithms name a known key of the right size;
    /// asymmetric ones carry the device's public key of the right type.
    public func checkEncryption(_ spec: EncryptionSpec) throws(RequestError) {
        if let jwk = spec.jwk, let object = jwk.objectValue,
            ["d", "p", "q", "dp", "dq", "qi", "k"].contains(where: { object[Key($0)] != nil })
        {
            throw RequestError(.invalid, "encryption.jwk: send the device's public key only; it holds private members")
        }
        // The same checks as building a sealer, without needing a signing key.
        _ = try encrypter(for: spec)
    }
}
