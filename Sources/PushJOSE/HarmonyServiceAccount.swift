import Crypto
import CryptoExtras
import PushCore
import PushJSON

/// A Huawei AppGallery Connect service-account key file, for Push Kit v3 (HarmonyOS 5 and
/// later, `docs/providers-2026.md`): what signs the JWT every `messages:send` request carries.
/// Huawei's v3 API takes the JWT itself as the bearer token; no token endpoint is called.
///
/// `@unchecked Sendable`: as ``ServiceAccountKey``, the RSA key is immutable and safe to share.
public struct HarmonyServiceAccount: @unchecked Sendable {
    /// `project_id`: AppGallery Connect's project, in the request's path.
    public let projectID: String
    /// `key_id`: the JWT header's `kid`.
    public let keyID: String
    /// `sub_account`: the JWT's `iss`.
    public let subAccount: String
    /// `token_uri`: the JWT's `aud` (Huawei's page fixes it to
    /// `https://oauth-login.cloud.huawei.com/oauth2/v3/token`).
    public let tokenURI: String
    public let privateKey: _RSA.Signing.PrivateKey

    /// The audience Huawei documents, used when the file has no `token_uri`.
    public static let defaultAudience = "https://oauth-login.cloud.huawei.com/oauth2/v3/token"
    /// How long a JWT is valid (Huawei: 3,600 s, reused within that time; more than a day is
    /// refused with 80300036).
    public static let lifetime: Int64 = 3_600

    /// Reads and checks the key file's JSON. Messages name the field at fault and never echo
    /// the private key.
    public init(json bytes: [UInt8]) throws(JOSEError) {
        let json: JSON
        do {
            json = try JSONParser.parseRejectingDuplicateKeys(bytes)
        } catch {
            throw .invalidKey("not a Push Kit service-account key file: \(error)")
        }
        guard case .object(let object) = json else {
            throw .invalidKey("a Push Kit service-account key file is a JSON object, this is \(json.typeName)")
        }
        func field(_ name: String) throws(JOSEError) -> String {
            guard case .string(let text)? = object[Key(name)], !text.isEmpty else {
                throw .invalidKey("the Push Kit service-account key file has no \(quote(name)) string")
            }
            guard text.utf8.count <= 16_384, !text.utf8.contains(where: { $0 < 0x20 && $0 != 0x0A && $0 != 0x0D }) else {
                throw .invalidKey("the Push Kit service-account key file's \(quote(name)) holds control characters or is too long")
            }
            return text
        }
        projectID = try field("project_id")
        guard projectID.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2D || $0 == 0x5F }),
            projectID.utf8.count <= 64
        else {
            throw .invalidKey("project_id \(quote(String(projectID.prefix(64)))) is not a project id (letters, digits, - and _)")
        }
        keyID = try field("key_id")
        subAccount = try field("sub_account")
        if object[Key("token_uri")] != nil {
            tokenURI = try field("token_uri")
        } else {
            tokenURI = Self.defaultAudience
        }
        let pem = try field("private_key")
        do {
            privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw .invalidKey("private_key is not a PEM RSA private key of at least 2048 bits")
        }
    }

    /// The JWT of a `messages:send` request (Huawei, "Generating a JWT Based on a Service
    /// Account"): header `{"kid","typ":"JWT","alg":"PS256"}`, claims `aud` (``tokenURI``),
    /// `iss` (``subAccount``), `exp` (an hour after `iat`) and `iat` (whole seconds), signed
    /// RSASSA-PSS with SHA-256 (salt of 32 bytes).
    public func jwt(now seconds: Int64) throws -> String {
        var header = JSONWriter()
        header.raw(#"{"kid":"#)
        header.writeString(keyID)
        header.raw(#","typ":"JWT","alg":"PS256"}"#)
        var claims = JSONWriter()
        claims.raw(#"{"aud":"#)
        claims.writeString(tokenURI)
        claims.raw(#","iss":"#)
        claims.writeString(subAccount)
        claims.raw(#","exp":"#)
        claims.writeInt(seconds.saturatingAdding(Self.lifetime))
        claims.raw(#","iat":"#)
        claims.writeInt(seconds)
        claims.raw("}")
        let signingInput = Base64URL.encodeToString(header.bytes) + "." + Base64URL.encodeToString(claims.bytes)
        let signature = try privateKey.signature(for: SHA256.hash(data: Array(signingInput.utf8)), padding: .PSS)
        return signingInput + "." + Base64URL.encodeToString(signature.rawRepresentation)
    }
}
