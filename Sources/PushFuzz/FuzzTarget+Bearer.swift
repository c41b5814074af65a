import PushJOSE
import PushJSON

extension FuzzTarget {
    /// `bearer`: the REST API's bearer tokens (`BearerTokenVerifier`, SPEC §5, §11.10), with the
    /// signing keys of the test key set, an issuer and an audience. The first byte chooses:
    ///
    /// - even: the rest is a token as a client sends it;
    /// - odd: the rest is a claims set, signed with one of the keys (the second byte chooses),
    ///   so that the claim checks are reached with a valid signature.
    ///
    /// A refusal's message is non-empty, bounded and does not contain the token's signature part.
    /// An accepted token has a non-empty subject, an `exp` and object claims.
    public static func bearer(_ data: UnsafeBufferPointer<UInt8>) throws(FuzzViolation) {
        var input = FuzzInput(data)
        let token: String
        if input.byte() % 2 == 0 {
            token = String(decoding: input.rest, as: UTF8.self)
        } else {
            let keys = bearerKeys.signingKeys
            let key = keys[Int(input.byte()) % keys.count]
            do {
                token = String(decoding: try JWSSigner(key: key).sign(input.rest), as: UTF8.self)
            } catch {
                throw FuzzViolation("signing claims with \(key.kid ?? "?") failed: \(error)")
            }
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        switch Result(catching: { () throws(BearerTokenVerifier.Failure) in try bearerVerifier.verify(token, now: 1_700_000_000) }) {
        case .success(let (subject, claims)):
            try Check.that(!subject.isEmpty, "a token accepted with an empty subject")
            try Check.that(claims["exp"] != nil, "a token accepted without exp")
            try Check.that(claims.objectValue != nil, "a token accepted with claims that are not an object")
        case .failure(let error):
            try Check.message(error.description, "a bearer token's refusal")
            if parts.count == 3 { try Check.doesNotEcho(error.description, secret: parts[2], "a bearer token's refusal") }
            try Check.doesNotEcho(error.description, secret: token, "a bearer token's refusal")
        }
    }

    /// The test key set's signing keys.
    static let bearerKeys: KeyRing = {
        do {
            return try KeyRing(joseKeys.signingKeys)
        } catch {
            fatalError("the test key set's signing keys: \(error)")
        }
    }()

    static let bearerVerifier = BearerTokenVerifier(keys: bearerKeys, issuer: "https://issuer.example", audience: "pushdispatch", leeway: 60)
}
