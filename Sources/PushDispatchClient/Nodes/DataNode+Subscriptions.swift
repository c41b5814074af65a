import PushCore
import PushJSON

extension DataNode {
    /// Subscribes this device to changes of this node, through its push provider (SPEC §5):
    /// FCM, HMS, APNs or Web Push, as ``PushDispatch/Configuration/deviceToken`` says.
    ///
    /// With ``NotificationEncryption/endToEnd(_:content:)`` the device key is made (and stored)
    /// first if there is none, and its public key is sent. Subscribing again to the same node
    /// refreshes the subscription (unless the descriptor's `allowsUpdate` is `false`).
    ///
    /// Errors say what the service answered: ``PushClientError/Code/permissionDenied`` when the
    /// read rules do not let the user read the node, ``PushClientError/Code/tooManySubscriptions``,
    /// ``PushClientError/Code/conflict``…
    @discardableResult
    public func subscribeThroughNotifications(descriptor: SubscriptionDescriptor = SubscriptionDescriptor()) async throws(PushClientError)
        -> NodeSubscription
    {
        let device = try await service.requireDeviceToken()
        var members = SubscriptionDocument.device(device, path: path)
        for (key, value) in try await service.options(descriptor) { members.append((key, value)) }
        return try await service.client.create(.object(JSONObject(members)), allowsUpdate: descriptor.allowsUpdate)
    }

    /// Removes this device's subscription to this node, if it has one.
    public func unsubscribeThroughNotifications() async throws(PushClientError) {
        let device = try await service.requireDeviceToken()
        try await service.client.remove(.object(JSONObject(SubscriptionDocument.device(device, path: path))))
    }

    /// Subscribes the application's webhook named `webhook` (in the service's configuration)
    /// to changes of this node; each notification's body carries `context`. The descriptor's
    /// mode and expiration apply; webhooks always receive the plain event (SPEC §11.11), so
    /// its format and encryption are not sent.
    @discardableResult
    public func subscribeThroughWebhook(_ webhook: String, context: String, descriptor: SubscriptionDescriptor = SubscriptionDescriptor())
        async throws(PushClientError) -> NodeSubscription
    {
        var members = try SubscriptionDocument.webhook(webhook, context: context, path: path)
        members.append((Key("mode"), .string(descriptor.mode.rawValue)))
        if let seconds = try descriptor.expirationSeconds() {
            members.append((Key("expirationTimestampSeconds"), .int(seconds)))
        }
        return try await service.client.create(.object(JSONObject(members)), allowsUpdate: descriptor.allowsUpdate)
    }

    /// Removes the subscription of the webhook `webhook` with `context` to this node, if
    /// there is one.
    public func unsubscribeThroughWebhook(_ webhook: String, context: String) async throws(PushClientError) {
        try await service.client.remove(.object(JSONObject(try SubscriptionDocument.webhook(webhook, context: context, path: path))))
    }
}

/// The members that name a subscription's tuple (SPEC §5): kind, path, context, destination.
enum SubscriptionDocument {
    static func device(_ device: DeviceToken, path: String) -> [(Key, JSON)] {
        [(Key("kind"), .string(device.kind.subscriptionKind)), (Key("path"), .string(path)), (Key("context"), .string(device.value))]
    }

    static func webhook(_ name: String, context: String, path: String) throws(PushClientError) -> [(Key, JSON)] {
        guard (1...128).contains(name.utf8.count), !name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw .invalidArgument("a webhook name is 1 to 128 bytes without control characters")
        }
        guard context.utf8.count <= DeviceToken.maxBytes else {
            throw .invalidArgument("a webhook context is at most \(DeviceToken.maxBytes) bytes; this one has \(context.utf8.count)")
        }
        return [
            (Key("kind"), .string("webhook")), (Key("path"), .string(path)), (Key("destination"), .string(name)),
            (Key("context"), .string(context)),
        ]
    }
}
