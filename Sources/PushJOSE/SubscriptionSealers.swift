import PushCore
import Synchronization

/// The sealers of v2 subscriptions: each application signs with its configured signing key, or
/// with the service's own ES256 key when it names none (SPEC §7.3); symmetric encryption keys
/// come from the application's key set, asymmetric ones from the subscription's `jwk`.
///
/// Sealers are cached by application and `encryption` block (building one parses the device's
/// key), up to ``cacheLimit`` entries.
public final class SubscriptionSealers: SealerProvider {
    /// What one application seals with.
    public struct Application: Sendable {
        public let keys: KeyRing
        public let signer: JWSSigner

        public init(keys: KeyRing, signer: JWSSigner) {
            self.keys = keys
            self.signer = signer
        }
    }

    public static let cacheLimit = 16_384

    let applications: [String: Application]
    /// For applications absent from `applications`.
    let fallback: Application
    private let cache = Mutex<[String: any EventSealer]>([:])

    public init(applications: [String: Application], fallback: Application) {
        self.applications = applications
        self.fallback = fallback
    }

    public func sealer(for subscription: Subscription) throws -> any EventSealer {
        let application = applications[subscription.app] ?? fallback
        guard let encryption = subscription.encryption else { return SignedEventSealer(signer: application.signer) }
        let key = subscription.app + "\u{0}" + encryption.json.description
        if let cached = cache.withLock({ $0[key] }) { return cached }
        let encrypter = try EventSealerFactory(keys: application.keys).encrypter(for: encryption)
        let sealer: any EventSealer =
            encrypter.keyAlgorithm.isAsymmetric
            ? NestedEventSealer(signer: application.signer, encrypter: encrypter) : EncryptedEventSealer(encrypter: encrypter)
        cache.withLock { cache in
            if cache.count >= Self.cacheLimit { cache.removeAll(keepingCapacity: true) }
            cache[key] = sealer
        }
        return sealer
    }
}
