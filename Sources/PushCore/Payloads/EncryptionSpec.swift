import PushJSON

/// The `encryption` block of a subscription or payload request (SPEC §7.3). Checked against
/// the supported algorithms by PushJOSE.
public struct EncryptionSpec: Sendable, Equatable {
    /// Key management algorithm: `dir`, `A128KW`, `A256KW`, `ECDH-ES`, `ECDH-ES+A256KW`,
    /// `RSA-OAEP-256`.
    public var alg: String
    /// Content encryption: `A256GCM` (default) or `A128GCM`.
    public var enc: String
    /// Key id: of the application's symmetric key, or of the device's public key.
    public var kid: String?
    /// The device's public key (JWK), for asymmetric algorithms.
    public var jwk: JSON?

    public static let defaultContentEncryption = "A256GCM"

    public init(alg: String, enc: String = EncryptionSpec.defaultContentEncryption, kid: String? = nil, jwk: JSON? = nil) {
        self.alg = alg
        self.enc = enc
        self.kid = kid
        self.jwk = jwk
    }

    /// Reads an `encryption` object; `field` names it in errors.
    public static func decode(_ json: JSON, field: String) throws(RequestError) -> EncryptionSpec {
        let reader = try FieldReader(json, name: field, allowed: ["alg", "enc", "kid", "jwk"])
        let alg = try reader.requiredString("alg")
        let enc = try reader.optionalString("enc") ?? defaultContentEncryption
        let kid = try reader.optionalString("kid")
        var jwk: JSON?
        if let value = reader.value("jwk"), !value.isNull {
            guard case .object = value else {
                throw RequestError(.invalid, "\(field).jwk: expected a JWK object, got \(value.typeName)")
            }
            jwk = value
        }
        return EncryptionSpec(alg: alg, enc: enc, kid: kid, jwk: jwk)
    }
}
