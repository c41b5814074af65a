import Crypto
import Foundation
import PushCore
import PushFakes
import PushJOSE
import PushJSON
import PushMatching
import PushTestSupport

/// Payloads made by the service's own code (the v1 and v2 builders, PushJOSE's sealers) with
/// the test key set, and the keys a device reads them with.
enum PayloadFixtures {
    static let keyset: KeyRing = {
        let url = ProviderFixtures.root.appendingPathComponent("jose/test-keyset.json")
        return try! KeyRing(jwkSetText: Array(try! Data(contentsOf: url)))
    }()

    /// The device's key pair (kid = thumbprint, use enc), as the library makes it.
    static let device: JWK = {
        let key = P256.Signing.PrivateKey()
        let material = JWK.Material.ecP256(public: key.publicKey, private: key)
        return JWK(material: material, kid: JWK(material: material).thumbprint, use: "enc")
    }()

    /// What a device of `toto` holds: the published (public) signing keys, the shared keys
    /// (HS256 secret, symmetric encryption keys) and its private key.
    static var readerKeys: [JWK] {
        var keys: [JWK] = [device]
        for key in keyset.keys {
            switch key.material {
            case .ecP256(let publicKey, _): keys.append(JWK(material: .ecP256(public: publicKey, private: nil), kid: key.kid, use: "sig"))
            case .ed25519(let publicKey, _): keys.append(JWK(material: .ed25519(public: publicKey, private: nil), kid: key.kid, use: "sig"))
            case .octet: keys.append(key)
            case .rsa: break
            }
        }
        return keys
    }

    /// How a payload is protected.
    enum Protection: String, CaseIterable, Sendable, CustomStringConvertible {
        case v1, es256, hs256, eddsa, dir, a128kw, a256kw, ecdhES, ecdhESA256KW

        var signing: String {
            switch self {
            case .hs256: return "sig-hs"
            case .eddsa: return "sig-ed"
            default: return "sig-es"
            }
        }

        var encryption: EncryptionSpec? {
            let devicePublic = PayloadFixtures.device.publicJSON
            switch self {
            case .v1, .es256, .hs256, .eddsa: return nil
            case .dir: return EncryptionSpec(alg: "dir", kid: "enc-dir")
            case .a128kw: return EncryptionSpec(alg: "A128KW", enc: "A128GCM", kid: "enc-kw128")
            case .a256kw: return EncryptionSpec(alg: "A256KW", kid: "enc-kw")
            case .ecdhES: return EncryptionSpec(alg: "ECDH-ES", kid: PayloadFixtures.device.kid, jwk: devicePublic)
            case .ecdhESA256KW: return EncryptionSpec(alg: "ECDH-ES+A256KW", enc: "A128GCM", kid: PayloadFixtures.device.kid, jwk: devicePublic)
            }
        }

        var description: String { rawValue }
    }

    /// The data payload of `event`, and the status the size rule chose (`.ok` for noData and
    /// revocations).
    static func payload(_ event: Event, _ protection: Protection) throws -> (bytes: [UInt8], status: PayloadStatus) {
        var out = JSONWriter(capacity: 4096)
        let status: PayloadStatus?
        if protection == .v1 {
            status = V1PayloadBuilder().build(event, into: &out)
        } else {
            let sealer = try EventSealerFactory(keys: keyset).sealer(signing: protection.signing, encryption: protection.encryption)
            var builder = V2PayloadBuilder()
            status = try builder.build(event, sealer: sealer, into: &out)
        }
        return (out.bytes, status ?? .ok)
    }

    /// The data map of a payload: its fields as strings.
    static func dataMap(_ bytes: [UInt8]) throws -> [String: String] {
        guard case .object(let object) = try JSONParser.parse(bytes) else { return [:] }
        var map: [String: String] = [:]
        for (key, value) in object { map[key.string] = value.stringValue }
        return map
    }
}
