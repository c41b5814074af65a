import PushJOSE

/// How the service encrypts the `evt` of a v2 subscription's notifications (SPEC §7.3).
public enum NotificationEncryption: Sendable, Hashable {
    /// End to end, to this device's own key: the library makes the P-256 key pair, keeps the
    /// private key in its ``DeviceKeyStore`` and sends the public key with the subscription.
    /// Only this device can read the notifications; the service signs what it encrypts, and
    /// the library checks that signature. The recommended choice.
    case endToEnd(KeyAgreement = .ecdhES, content: JWEContentAlgorithm = .a256gcm)
    /// With a symmetric key the application configured on the service under `kid`, which the
    /// device holds too (``PushDispatch/Configuration/sharedKeys``).
    case sharedKey(kid: String, algorithm: SharedKeyAlgorithm = .direct, content: JWEContentAlgorithm = .a256gcm)

    /// Key agreement to the device's key.
    public enum KeyAgreement: String, Sendable, Hashable, CaseIterable {
        /// `ECDH-ES`: the agreed key is the content key.
        case ecdhES = "ECDH-ES"
        /// `ECDH-ES+A256KW`: the agreed key wraps a random content key.
        case ecdhESA256KW = "ECDH-ES+A256KW"
    }

    /// Key management with a shared symmetric key.
    public enum SharedKeyAlgorithm: String, Sendable, Hashable, CaseIterable {
        /// `dir`: the shared key is the content key.
        case direct = "dir"
        /// `A128KW`: the shared 128-bit key wraps a random content key.
        case a128KW = "A128KW"
        /// `A256KW`: the shared 256-bit key wraps a random content key.
        case a256KW = "A256KW"
    }

    /// The `alg` of the subscription's `encryption` block.
    var algorithm: String {
        switch self {
        case .endToEnd(let agreement, _): return agreement.rawValue
        case .sharedKey(_, let algorithm, _): return algorithm.rawValue
        }
    }

    /// The `enc` of the block.
    var content: JWEContentAlgorithm {
        switch self {
        case .endToEnd(_, let content), .sharedKey(_, _, let content): return content
        }
    }
}
