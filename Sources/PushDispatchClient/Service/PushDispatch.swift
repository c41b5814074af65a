import Foundation
import PushCore
import PushJOSE
import Synchronization

/// The push side of one Webcom application, as an app sees it: the nodes it subscribes to,
/// this device's token and key, and the notifications it receives.
///
/// Made once per application, like the Webcom SDK's `DataService`:
///
/// ```swift
/// let push = try PushDispatch(.init(
///     baseURL: URL(string: "https://push.example.com")!, app: "toto",
///     credentials: { refresh in try await session.credentials(forceRefresh: refresh) },
///     deviceToken: try .fcm(registrationToken)))
/// let subscription = try await push.node(for: "/rooms/lobby")
///     .subscribeThroughNotifications(descriptor: .init(mode: .value, encryption: .endToEnd()))
/// ```
///
/// Every request carries the credentials provider's current token and has a deadline. A
/// ``PushDispatch`` is safe to use from any task.
public final class PushDispatch: Sendable {
    /// The application id.
    public let app: String
    /// The service's base URL.
    public let baseURL: URL
    let client: SubscriptionClient
    let device: DeviceRegistration
    let deviceKeys: DeviceKeys
    let publishedKeys: PublishedKeys
    let sharedKeys: [JWK]
    let queue: OperationQueueActor

    /// A service object for `configuration`. Throws ``PushClientError/Code/invalidArgument``
    /// for a base URL that is not `https://` (or `http://` on a loopback host), or an invalid
    /// application id.
    public init(_ configuration: Configuration) throws(PushClientError) {
        let rest = try RESTClient(
            baseURL: configuration.baseURL, app: configuration.app, credentials: configuration.credentials,
            timeout: configuration.requestTimeout, session: configuration.session)
        for key in configuration.sharedKeys {
            guard case .octet = key.material, key.kid != nil else {
                throw .invalidArgument("shared keys are secret (oct) keys with a kid; \(key.label) is not")
            }
        }
        guard (1...QueueDocument.maxOperations).contains(configuration.offlineQueue.limit) else {
            throw .invalidArgument("the offline queue's limit is 1 to \(QueueDocument.maxOperations) operations, got \(configuration.offlineQueue.limit)")
        }
        app = configuration.app
        baseURL = configuration.baseURL
        client = SubscriptionClient(rest: rest)
        device = DeviceRegistration(token: configuration.deviceToken)
        queue = OperationQueueActor(
            app: configuration.app, configuration: configuration.offlineQueue, executor: OperationExecutor(client: client), device: device)
        if configuration.offlineQueue.isPersistenceEnabled {
            // What an earlier launch queued is sent now, as Firebase sends its kept writes.
            Task { [queue] in await queue.start() }
        }
        deviceKeys = DeviceKeys(store: configuration.keyStore)
        sharedKeys = configuration.sharedKeys
        let start = ContinuousClock.now
        publishedKeys = PublishedKeys(
            fetch: { () async throws(PushClientError) -> [UInt8] in
                let answer = try await rest.getPublic(".well-known/jwks.json")
                guard answer.status == 200 else { throw answer.error }
                return answer.body
            },
            maxAge: configuration.keysMaxAge, refetchInterval: configuration.keysRefetchInterval, now: { ContinuousClock.now - start })
    }

    /// Closes the offline queue: a queue outlives no ``PushDispatch`` (it would keep sending with
    /// the old credentials provider, and hold its file from a new one).
    deinit {
        Task { [queue] in await queue.close() }
    }

    /// The root node, `/`.
    public var root: DataNode {
        DataNode(service: self, location: .root)
    }

    /// The node at `path`, from the root, normalised as the SDK's `relativeNode(for:)` does
    /// (SPEC §2): empty segments and `.` are ignored, `..` goes up (not above the root). Throws
    /// ``PushClientError/Code/invalidArgument`` for a key with `. $ # [ ] /` or a control
    /// character, an empty or over-768-byte key, or a path over 2048 bytes.
    public func node(for path: String) throws(PushClientError) -> DataNode {
        try root.relativeNode(for: path)
    }

    /// This device's push token, if the app gave one.
    public func deviceToken() async -> DeviceToken? {
        device.token
    }

    /// Sets this device's push token without touching existing subscriptions (the first
    /// token; to replace a token that changed, use ``updateDeviceTokenInAllSubscriptions(_:replacing:)``).
    public func setDeviceToken(_ token: DeviceToken?) async {
        device.set(token)
    }

    /// The device's public key (made and stored first if there is none): what end-to-end
    /// subscriptions send as `encryption.jwk`.
    public func devicePublicKey() async throws(PushClientError) -> JWK {
        guard let key = try await deviceKeys.key(create: true), let publicJSON = key.publicJSON,
            let publicKey = try? JWK(json: publicJSON)
        else {
            throw PushClientError(.keyStore, "the device key could not be made")
        }
        return publicKey
    }

    /// Removes the device key from memory and from the key store. Notifications encrypted to
    /// it can no longer be read; end-to-end subscriptions must be made again (they then get a
    /// new key).
    public func resetDeviceKey() async throws(PushClientError) {
        try await deviceKeys.reset()
    }
}

/// The device token, which changes when the provider issues a new one. Synchronous, so that
/// the offline queue's actor reads and replaces it in one step with queuing a token update.
final class DeviceRegistration: Sendable {
    private let value: Mutex<DeviceToken?>

    init(token: DeviceToken?) {
        value = Mutex(token)
    }

    var token: DeviceToken? {
        value.withLock { $0 }
    }

    func set(_ token: DeviceToken?) {
        value.withLock { $0 = token }
    }
}
