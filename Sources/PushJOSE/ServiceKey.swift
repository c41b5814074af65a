import Crypto
import PushCore

/// Where the service keeps its own signing keys (SPEC §7.3: "created once and kept in the
/// store"). PushStore implements it; the newest key signs, all are published.
public protocol ServiceKeyStore: Sendable {
    /// The stored keys (private JWKs), oldest first.
    func loadServiceKeys() async throws -> [JWK]
    /// Stores a new key.
    func saveServiceKey(_ key: JWK) async throws
}

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

    /// The stored keys, after creating and storing one if there was none. The last one signs.
    public static func loadOrCreate(in store: some ServiceKeyStore) async throws -> [JWK] {
        let keys = try await store.loadServiceKeys()
        if !keys.isEmpty { return keys }
        let key = generate()
        try await store.saveServiceKey(key)
        return [key]
    }

    /// The public JWK Set of `keys`: `{"keys":[…]}`, private members left out.
    public static func publicJWKSet(_ keys: [JWK]) -> JSON {
        .object(JSONObject([(Key("keys"), JSON.array(keys.compactMap(\.publicJSON)))]))
    }
}
