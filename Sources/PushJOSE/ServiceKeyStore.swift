import PushJSON

/// Where the service keeps its own signing keys (private JWKs as JSON), oldest first.
public protocol ServiceKeyStore: Sendable {
    func loadServiceKeys() async throws -> [JSON]

    /// Stores `jwk` if the store holds no service key yet, atomically (of processes starting
    /// together on one store, exactly one key is created); returns the stored keys.
    func createServiceKeyIfNone(_ jwk: JSON, kid: String) async throws -> [JSON]
}
