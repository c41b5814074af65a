import Crypto
import PushCore
import PushJSON

/// The service's own ES256 signing key: used for applications that configure no signing key,
/// published at `/.well-known/jwks.json`.
public enum ServiceKey {
    /// A new P-256 key: `kid` is its RFC 7638 thumbprint, `alg` ES256, `use` sig.
    public static func generate() -> JWK {
        let privateKey = P256.Signing.PrivateKey()
        let material = JWK.Material.ecP256(public: privateKey.publicKey, private: privateKey)
        let thumbprint = JWK(material: material).thumbprint
        return JWK(material: material, kid: thumbprint, use: KeyUse.signature.rawValue, alg: JWSAlgorithm.es256.rawValue)
    }

    /// The stored keys (SPEC §7.3: "created once and kept in the store"), after creating and
    /// storing one if there was none. The last one signs; all are published.
    public static func loadOrCreate(in store: some ServiceKeyStore) async throws -> [JWK] {
        var stored = try await store.loadServiceKeys()
        if stored.isEmpty {
            // Another process may create one at the same moment: the store keeps exactly one.
            let key = generate()
            stored = try await store.createServiceKeyIfNone(key.privateJSON, kid: key.kid!)
        }
        return try stored.enumerated().map { index, json in try JWK(json: json, where: "service key \(index)") }
    }

    /// The public JWK Set of `keys`: `{"keys":[…]}`, private members left out.
    public static func publicJWKSet(_ keys: [JWK]) -> JSON {
        .object(JSONObject([(Key("keys"), JSON.array(keys.compactMap(\.publicJSON)))]))
    }
}
