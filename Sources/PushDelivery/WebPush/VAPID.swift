import Crypto
import Foundation
import PushCore
import PushJSON
import PushJOSE

/// Voluntary application server identification for Web Push (RFC 8292): a JWT signed with
/// the application's P-256 key (ES256), sent as `Authorization: vapid t=<JWT>, k=<public key>`.
/// Its claims are `aud` (the push resource's origin), `exp` (at most 24 hours ahead) and `sub`
/// (a `mailto:` or `https:` contact), written in that order.
public struct VAPIDKey: Sendable {
    public let privateKey: P256.Signing.PrivateKey
    /// The public key as `k` carries it: base64url of the 65-byte uncompressed point.
    public let publicKeyText: String

    /// The longest `exp` may be ahead of the request (RFC 8292 §2).
    public static let maximumLifetime: Int64 = 86_400

    public init(privateKey: P256.Signing.PrivateKey) {
        self.privateKey = privateKey
        publicKeyText = Base64URL.encodeToString(privateKey.publicKey.x963Representation)
    }

    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Reads the application's VAPID private key as operators have it: a PEM P-256 key
    /// (`-----BEGIN PRIVATE KEY-----` or `-----BEGIN EC PRIVATE KEY-----`, as `openssl ecparam
    /// -genkey -name prime256v1` writes), or the base64url of the raw 32-byte scalar (as
    /// `web-push generate-vapid-keys` and py_vapid print it). The error never shows the key.
    public init(text: String) throws(Invalid) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("-----BEGIN") {
            guard let key = try? P256.Signing.PrivateKey(pemRepresentation: trimmed) else {
                throw Invalid(description: "a PEM key that is not a P-256 private key")
            }
            self.init(privateKey: key)
            return
        }
        guard let raw = Base64URL.decode(trimmed), raw.count == 32, let key = try? P256.Signing.PrivateKey(rawRepresentation: raw) else {
            throw Invalid(description: "expected a PEM P-256 private key, or the base64url of its 32-byte raw value")
        }
        self.init(privateKey: key)
    }

    /// The header `{"typ":"JWT","alg":"ES256"}`, base64url (as in RFC 8292's example).
    static let encodedHeader = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8))

    /// `header.claims`, the bytes the signature covers.
    public static func signingInput(audience: String, expiresAt: Int64, subject: String) -> [UInt8] {
        var claims = JSONWriter(capacity: 128)
        claims.raw("{\"aud\":")
        claims.writeString(audience)
        claims.raw(",\"exp\":")
        claims.writeInt(expiresAt)
        claims.raw(",\"sub\":")
        claims.writeString(subject)
        claims.raw("}")
        return encodedHeader + [UInt8(ascii: ".")] + Base64URL.encode(claims.bytes)
    }

    /// The signed JWT.
    public func token(audience: String, expiresAt: Int64, subject: String) throws -> String {
        var token = Self.signingInput(audience: audience, expiresAt: expiresAt, subject: subject)
        let signature = try privateKey.signature(for: token).rawRepresentation
        token.append(UInt8(ascii: "."))
        token += Base64URL.encode(signature)
        return String(decoding: token, as: UTF8.self)
    }

    /// The `Authorization` header value for a push resource of `audience` (its origin).
    public func authorization(audience: String, expiresAt: Int64, subject: String) throws -> String {
        "vapid t=\(try token(audience: audience, expiresAt: expiresAt, subject: subject)), k=\(publicKeyText)"
    }
}

/// The push service's side of VAPID (the fake, tests): parses and verifies an
/// `Authorization: vapid t=…, k=…` header.
public enum VAPIDVerifier {
    public struct Claims: Sendable, Equatable {
        public var audience: String
        public var expiresAt: Int64
        public var subject: String
        /// The sender's public key (`k`), base64url.
        public var publicKey: String
    }

    public struct Refusal: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Verifies the header's signature with its own `k`, then the claims: `aud` equal to
    /// `origin`, `exp` after `now` and at most 24 hours ahead, `sub` a `mailto:` or `https:` URI.
    public static func verify(_ header: String, origin: String, now: Int64) throws(Refusal) -> Claims {
        guard header.hasPrefix("vapid ") else { throw Refusal(description: "the Authorization scheme is not vapid") }
        var token: Substring?
        var key: Substring?
        for part in header.dropFirst(6).split(separator: ",") {
            let field = part.drop { $0 == " " }
            if field.hasPrefix("t=") { token = field.dropFirst(2) } else if field.hasPrefix("k=") { key = field.dropFirst(2) }
        }
        guard let token, let key else { throw Refusal(description: "the vapid header needs both t= and k=") }
        guard let point = Base64URL.decode(String(key)), let publicKey = try? P256.Signing.PublicKey(x963Representation: point) else {
            throw Refusal(description: "k is not a base64url uncompressed P-256 public key")
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])), let claimsBytes = Base64URL.decode(String(parts[1])),
            let signatureBytes = Base64URL.decode(String(parts[2]))
        else { throw Refusal(description: "t is not a compact JWT (three base64url parts)") }
        guard let jwtHeader = try? JSONParser.parse(headerBytes), jwtHeader["alg"]?.stringValue == "ES256" else {
            throw Refusal(description: "the JWT header does not say alg ES256")
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            publicKey.isValidSignature(signature, for: Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8))
        else { throw Refusal(description: "the JWT signature does not verify with k") }
        guard let claims = try? JSONParser.parse(claimsBytes), let audience = claims["aud"]?.stringValue,
            let expiresAt = claims["exp"]?.integerValue, let subject = claims["sub"]?.stringValue
        else { throw Refusal(description: "the JWT claims need aud (text), exp (an integer) and sub (text)") }
        guard audience == origin else { throw Refusal(description: "aud \(audience.prefix(100)) is not the push resource's origin \(origin)") }
        guard expiresAt > now else { throw Refusal(description: "exp \(expiresAt) has passed (now \(now))") }
        guard expiresAt.saturatingSubtracting(now) <= VAPIDKey.maximumLifetime else {
            throw Refusal(description: "exp \(expiresAt) is more than 24 hours after now (\(now))")
        }
        guard subject.hasPrefix("mailto:") || subject.hasPrefix("https:") else {
            throw Refusal(description: "sub must be a mailto: or https: URI")
        }
        return Claims(audience: audience, expiresAt: expiresAt, subject: subject, publicKey: String(key))
    }
}
