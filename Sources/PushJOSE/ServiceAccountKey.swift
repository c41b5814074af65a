import CryptoExtras
import PushCore
import PushJSON

/// A Google service-account key file (the JSON the Firebase console downloads): what FCM's
/// OAuth needs to sign its JWT bearer grant (RS256) and where to send it.
///
/// `@unchecked Sendable`: swift-crypto's RSA private key wraps an immutable BoringSSL `RSA`
/// object whose operations are safe from several threads at once, but does not declare
/// `Sendable`.
public struct ServiceAccountKey: @unchecked Sendable {
    public let projectID: String
    public let clientEmail: String
    /// `private_key_id`: the `kid` of the assertion's header.
    public let privateKeyID: String?
    /// Where the assertion is exchanged for an access token.
    public let tokenURI: String
    public let privateKey: _RSA.Signing.PrivateKey

    /// Reads and checks a service-account file's JSON. Messages name the field at fault and
    /// never echo the private key.
    public init(json bytes: [UInt8]) throws(JOSEError) {
        let json: JSON
        do {
            json = try JSONParser.parseRejectingDuplicateKeys(bytes)
        } catch {
            throw .invalidKey("not a service-account key file: \(error)")
        }
        guard case .object(let object) = json else {
            throw .invalidKey("a service-account key file is a JSON object, this is \(json.typeName)")
        }
        func field(_ name: String) throws(JOSEError) -> String {
            guard case .string(let text)? = object[Key(name)], !text.isEmpty else {
                throw .invalidKey("the service-account key file has no \(quote(name)) string")
            }
            return text
        }
        if case .string(let type)? = object[Key("type")], type != "service_account" {
            throw .invalidKey("type is \(quote(type)), not \"service_account\"")
        }
        projectID = try field("project_id")
        clientEmail = try field("client_email")
        tokenURI = try field("token_uri")
        guard tokenURI.hasPrefix("https://") || tokenURI.hasPrefix("http://") else {
            throw .invalidKey("token_uri \(quote(tokenURI)) is not an http(s) URL")
        }
        privateKeyID = object[Key("private_key_id")]?.stringValue
        let pem = try field("private_key")
        do {
            privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw .invalidKey("private_key is not a PEM RSA private key of at least 2048 bits")
        }
    }
}

extension ServiceAccountKey {
    /// The scope FCM HTTP v1 needs.
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"

    /// The signed JWT of the bearer grant (RFC 7523) Google's token endpoint exchanges for an
    /// access token: RS256, `kid` = `private_key_id`; `iss` the service account, `scope`
    /// FCM's, `aud` the key's `token_uri`, `iat` now and `exp` an hour later (whole seconds).
    public func assertion(now seconds: Int64, scope: String = Self.messagingScope) throws -> String {
        var header = JSONWriter()
        header.raw(#"{"alg":"RS256","typ":"JWT""#)
        if let privateKeyID {
            header.raw(#","kid":"#)
            header.writeString(privateKeyID)
        }
        header.raw("}")
        var claims = JSONWriter()
        claims.raw(#"{"iss":"#)
        claims.writeString(clientEmail)
        claims.raw(#","scope":"#)
        claims.writeString(scope)
        claims.raw(#","aud":"#)
        claims.writeString(tokenURI)
        claims.raw(#","iat":"#)
        claims.writeInt(seconds)
        claims.raw(#","exp":"#)
        claims.writeInt(seconds.saturatingAdding(3_600))
        claims.raw("}")
        let signingInput = Base64URL.encodeToString(header.bytes) + "." + Base64URL.encodeToString(claims.bytes)
        let signature = try privateKey.signature(for: Array(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + Base64URL.encodeToString(signature.rawRepresentation)
    }
}
