import PushCore
import PushJOSE

/// The service's published signing keys (`GET /.well-known/jwks.json`): fetched when first
/// needed, used for ``maxAge``, fetched again before that when a notification names a `kid`
/// they lack, but not more often than every ``refetchInterval`` (forged notifications with
/// made-up kids must not turn the app into a client hammering the service).
///
/// Only public signature keys are taken from the set: a secret (`oct`) key or a key marked
/// for encryption is ignored, and private members are dropped, so that nothing fetched over
/// the network can decrypt or be used to forge.
actor PublishedKeys {
    typealias Fetch = @Sendable () async throws(PushClientError) -> [UInt8]

    let fetch: Fetch
    let maxAge: Duration
    let refetchInterval: Duration
    /// Monotonic time.
    let now: @Sendable () -> Duration

    private var keys: [JWK]?
    /// When the cached keys were fetched.
    private var fetchedAt: Duration?
    /// When a fetch was last tried, whether or not it worked.
    private var attemptedAt: Duration?
    /// The fetch under way, shared by the callers that arrive meanwhile.
    private var fetching: Task<[JWK], any Error>?

    init(fetch: @escaping Fetch, maxAge: Duration, refetchInterval: Duration, now: @escaping @Sendable () -> Duration) {
        self.fetch = fetch
        self.maxAge = maxAge
        self.refetchInterval = refetchInterval
        self.now = now
    }

    /// The keys: the cached ones while fresh, else fetched. A failed fetch falls back on keys
    /// fetched before, however old.
    func current() async throws(PushClientError) -> [JWK] {
        if let keys, let fetchedAt, now() - fetchedAt < maxAge { return keys }
        do {
            return try await refresh()
        } catch {
            if let keys { return keys }
            throw error
        }
    }

    /// Fetches again after a notification named an unknown `kid`, unless the last fetch is
    /// more recent than ``refetchInterval``; `true` when a fetch was made.
    func refetchForUnknownKey() async throws(PushClientError) -> Bool {
        if let attemptedAt, now() - attemptedAt < refetchInterval { return false }
        _ = try await refresh()
        return true
    }

    private func refresh() async throws(PushClientError) -> [JWK] {
        let task: Task<[JWK], any Error>
        if let fetching {
            task = fetching
        } else {
            let fetch = self.fetch
            task = Task { try Self.signatureKeys(try await fetch()) }
            fetching = task
        }
        do {
            let fetched = try await task.value
            if fetching == task {
                fetching = nil
                keys = fetched
                fetchedAt = now()
                attemptedAt = fetchedAt
            }
            return fetched
        } catch {
            if fetching == task {
                fetching = nil
                // A failure counts for the refetch interval: an unreachable service is not
                // asked again for every notification naming an unknown kid.
                attemptedAt = now()
            }
            if let error = error as? PushClientError { throw error }
            throw PushClientError(.invalidResponse, Bounded.text(String(describing: error), limit: 200))
        }
    }

    /// The public signature keys of a JWK Set's text.
    static func signatureKeys(_ text: [UInt8]) throws(PushClientError) -> [JWK] {
        let ring: KeyRing
        do {
            ring = try KeyRing(jwkSetText: text)
        } catch {
            throw .invalidResponse("the service's /.well-known/jwks.json is not a usable JWK Set: \(error)")
        }
        return ring.keys.compactMap { key -> JWK? in
            guard key.kid != nil, key.use == nil || key.use == KeyUse.signature.rawValue else { return nil }
            let material: JWK.Material
            switch key.material {
            case .ecP256(let publicKey, _): material = .ecP256(public: publicKey, private: nil)
            case .ed25519(let publicKey, _): material = .ed25519(public: publicKey, private: nil)
            case .rsa, .octet: return nil  // events are never RS256-signed; a secret is never published
            }
            return JWK(material: material, kid: key.kid, use: KeyUse.signature.rawValue, alg: key.alg)
        }
    }
}
