import Crypto
import Foundation
import PushCore
import PushJSON
import PushJOSE

/// The device's P-256 key pair, loaded from its ``DeviceKeyStore`` (or made and stored there
/// the first time an end-to-end subscription needs it), then kept in memory.
///
/// Its `kid` is its RFC 7638 thumbprint and its `use` is `enc`: it decrypts the notifications
/// the service encrypted to it, and nothing else.
actor DeviceKeys {
    let store: any DeviceKeyStore
    private var key: JWK?
    /// The load (or load-or-create) under way: callers that arrive meanwhile wait for it, so
    /// the key is made once even when two subscriptions start together. (The actor is
    /// reentrant while the store works.)
    private var loading: Task<JWK?, any Error>?

    init(store: any DeviceKeyStore) {
        self.store = store
    }

    /// The key, made and stored first when `create` and there is none.
    func key(create: Bool) async throws(PushClientError) -> JWK? {
        while true {
            if let key { return key }
            if let task = loading {
                let result: JWK?
                do {
                    result = try await Self.wait(task)
                } catch {
                    if loading == task { loading = nil }
                    throw error
                }
                if loading == task { loading = nil }
                if let result {
                    key = result
                    return result
                }
                if !create { return nil }
                // That one only loaded, and found nothing: start one that creates (unless
                // another caller did meanwhile).
                continue
            }
            let store = self.store
            loading = Task { () throws -> JWK? in
                if let stored = try await Self.load(store) { return stored }
                guard create else { return nil }
                let made = Self.generate()
                do {
                    try await store.saveKey(Data(made.privateJSON.description.utf8))
                } catch {
                    throw PushClientError(.keyStore, "the device key could not be stored: \(Bounded.text(String(describing: error), limit: 200))")
                }
                return made
            }
        }
    }

    /// Forgets the key here and in the store: the next end-to-end subscription makes a new
    /// one (notifications encrypted to the old one can no longer be read).
    func reset() async throws(PushClientError) {
        key = nil
        do {
            try await store.deleteKey()
        } catch {
            throw PushClientError(.keyStore, "the device key could not be removed: \(Bounded.text(String(describing: error), limit: 200))")
        }
    }

    static func wait(_ task: Task<JWK?, any Error>) async throws(PushClientError) -> JWK? {
        do {
            return try await task.value
        } catch let error as PushClientError {
            throw error
        } catch {
            throw PushClientError(.keyStore, Bounded.text(String(describing: error), limit: 200))
        }
    }

    /// The stored key, checked: a private EC P-256 JWK.
    static func load(_ store: any DeviceKeyStore) async throws(PushClientError) -> JWK? {
        let data: Data?
        do {
            data = try await store.loadKey()
        } catch {
            throw PushClientError(.keyStore, "the device key could not be read: \(Bounded.text(String(describing: error), limit: 200))")
        }
        guard let data else { return nil }
        let fix = "; remove it (PushDispatch.resetDeviceKey()) and subscribe again to make a new one"
        guard data.count <= 16_384 else { throw PushClientError(.keyStore, "the stored device key is \(data.count) bytes, not a JWK" + fix) }
        let stored: JWK
        do {
            stored = try JWK(json: try JSONParser.parse([UInt8](data)), where: "the stored device key")
        } catch {
            // The parser's and JWK's messages name members, never their values.
            throw PushClientError(.keyStore, "the stored device key is not a JWK (\(error))" + fix)
        }
        guard case .ecP256(let publicKey, let privateKey?) = stored.material else {
            throw PushClientError(.keyStore, "the stored device key is not a private EC P-256 key" + fix)
        }
        return deviceKey(.ecP256(public: publicKey, private: privateKey))
    }

    /// A new P-256 key.
    static func generate() -> JWK {
        let privateKey = P256.Signing.PrivateKey()
        return deviceKey(.ecP256(public: privateKey.publicKey, private: privateKey))
    }

    /// The key as the device uses it: kid = thumbprint, use `enc`, no `alg` (it serves both
    /// `ECDH-ES` and `ECDH-ES+A256KW`).
    static func deviceKey(_ material: JWK.Material) -> JWK {
        JWK(material: material, kid: JWK(material: material).thumbprint, use: KeyUse.encryption.rawValue)
    }
}
