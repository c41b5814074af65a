import Foundation

/// Where the device's private key is kept between launches: the key that end-to-end encrypted
/// notifications are encrypted to (SPEC §7.3, `ECDH-ES`). The library makes the key the first
/// time an end-to-end subscription is made, and stores it here as the JSON text of a private
/// JWK.
///
/// ``FileDeviceKeyStore`` keeps it in a file readable by its owner only. On Apple platforms an
/// app may keep it on the Keychain instead: implement these three functions with
/// `SecItemCopyMatching`, `SecItemAdd` / `SecItemUpdate` and `SecItemDelete` on a
/// `kSecClassGenericPassword` item (with `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`, so
/// that a notification received while the device is locked can still be read, and the key
/// never leaves the device in a backup).
public protocol DeviceKeyStore: Sendable {
    /// The stored key, or `nil` when there is none yet.
    func loadKey() async throws -> Data?
    /// Stores `key`, replacing any stored one.
    func saveKey(_ key: Data) async throws
    /// Removes the stored key (a missing key is not an error).
    func deleteKey() async throws
}

/// A key store in memory: the key lives as long as the process. For command-line tools and
/// tests that do not need the key to outlive them.
public actor InMemoryDeviceKeyStore: DeviceKeyStore {
    private var key: Data?

    /// An empty store.
    public init() {}

    /// The key saved last, if any.
    public func loadKey() -> Data? { key }

    /// Keeps `key`.
    public func saveKey(_ key: Data) { self.key = key }

    /// Forgets the key.
    public func deleteKey() { key = nil }
}
