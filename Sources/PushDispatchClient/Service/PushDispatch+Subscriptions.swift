import Foundation
import PushCore
import PushJSON
import PushJOSE

extension PushDispatch {
    /// Every subscription of the signed-in user in the application: this device's, the user's
    /// other devices', and webhooks.
    public func subscriptions() async throws(PushClientError) -> [NodeSubscription] {
        try await client.list()
    }

    /// Removes every subscription of this device (its current token) in the application, and
    /// returns how many there were. The user's other devices and webhooks keep theirs.
    @discardableResult
    public func unsubscribeFromAllThroughNotifications() async throws(PushClientError) -> Int {
        let device = try await requireDeviceToken()
        var removed = 0
        for subscription in try await client.list() where subscription.target == .device(device) {
            do {
                try await client.delete(id: subscription.id)
                removed += 1
            } catch let error where error.code == .notFound {
                // Gone meanwhile (expired, revoked): what was asked.
            }
        }
        return removed
    }

    /// Moves every subscription of `oldToken` (by default, the current device token) to
    /// `newToken`, as the SDK documentation prescribes when the provider issues a new token:
    /// each is made again with the new token (same node, mode, format, encryption and
    /// expiration), then the former one is removed. `newToken` becomes the device token.
    ///
    /// Returns the new subscriptions. When some could not be moved (the read rules no longer
    /// allow the node, say), the others are moved all the same and
    /// ``PushClientError/Code/partialUpdate`` names the nodes left; call again with
    /// `replacing:` the old token to retry them.
    @discardableResult
    public func updateDeviceTokenInAllSubscriptions(_ newToken: DeviceToken, replacing oldToken: DeviceToken? = nil)
        async throws(PushClientError) -> [NodeSubscription]
    {
        let former: DeviceToken?
        if let oldToken { former = oldToken } else { former = device.token }
        guard let former, former != newToken else {
            device.set(newToken)
            return []
        }
        let all = try await client.list()
        device.set(newToken)
        var moved: [NodeSubscription] = []
        var failures: [String] = []
        for subscription in all where subscription.target == .device(former) {
            do {
                moved.append(try await client.create(Self.document(moving: subscription, to: newToken), allowsUpdate: true))
            } catch {
                failures.append("\(Bounded.quoted(subscription.path)): \(error)")
                continue
            }
            do {
                try await client.delete(id: subscription.id)
            } catch let error where error.code == .notFound {
                // Gone meanwhile: what was asked.
            } catch {
                failures.append("\(Bounded.quoted(subscription.path)) (the former subscription \(subscription.id) is left): \(error)")
            }
        }
        if !failures.isEmpty {
            throw PushClientError(
                .partialUpdate,
                "\(moved.count) subscriptions moved to the new token; \(failures.count) not: " + failures.prefix(5).joined(separator: "; "))
        }
        return moved
    }

    /// The document of `subscription` with `token` as its device.
    static func document(moving subscription: NodeSubscription, to token: DeviceToken) -> JSON {
        var members = SubscriptionDocument.device(token, path: subscription.path)
        members.append((Key("mode"), .string(subscription.mode.rawValue)))
        members.append((Key("format"), .string(subscription.format.rawValue)))
        if let encryption = subscription.encryption { members.append((Key("encryption"), encryption)) }
        if subscription.expiresAt.timeIntervalSinceNow > 1, let seconds = try? SubscriptionDescriptor.seconds(subscription.expiresAt) {
            members.append((Key("expirationTimestampSeconds"), .int(seconds)))
        }
        return .object(JSONObject(members))
    }

    /// The device token, or ``PushClientError/Code/invalidArgument`` when the app gave none.
    func requireDeviceToken() async throws(PushClientError) -> DeviceToken {
        guard let token = device.token else {
            throw .invalidArgument("this device has no push token yet: set one (setDeviceToken) before subscribing through notifications")
        }
        return token
    }

    /// The members of a device subscription's document that `descriptor` sets: mode, format,
    /// encryption (with this device's public key, made first if needed) and expiration.
    func options(_ descriptor: SubscriptionDescriptor) async throws(PushClientError) -> JSONObject {
        var members: [(Key, JSON)] = [(Key("mode"), .string(descriptor.mode.rawValue)), (Key("format"), .string(descriptor.format.rawValue))]
        if let encryption = descriptor.encryption {
            guard descriptor.format == .v2 else {
                throw .invalidArgument("only v2 payloads are encrypted; this descriptor asks for format v1 with encryption")
            }
            members.append((Key("encryption"), try await encryptionBlock(encryption)))
        }
        if let seconds = try descriptor.expirationSeconds() {
            members.append((Key("expirationTimestampSeconds"), .int(seconds)))
        }
        return JSONObject(members)
    }

    /// The subscription's `encryption` block (SPEC §7.3).
    func encryptionBlock(_ encryption: NotificationEncryption) async throws(PushClientError) -> JSON {
        var members: [(Key, JSON)] = [(Key("alg"), .string(encryption.algorithm)), (Key("enc"), .string(encryption.content.rawValue))]
        switch encryption {
        case .endToEnd:
            let key = try await devicePublicKey()
            guard let kid = key.kid, let publicJSON = key.publicJSON else { throw PushClientError(.keyStore, "the device key has no kid") }
            members.append((Key("kid"), .string(kid)))
            members.append((Key("jwk"), publicJSON))
        case .sharedKey(let kid, _, _):
            guard !kid.isEmpty else { throw .invalidArgument("a shared-key encryption names the key's kid") }
            members.append((Key("kid"), .string(kid)))
        }
        return .object(JSONObject(members))
    }
}
