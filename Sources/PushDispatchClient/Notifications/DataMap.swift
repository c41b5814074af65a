/// The data map of a push, picked out of what a platform hands the app.
///
/// Push providers add fields of their own beside the ones the service sent: FCM on Apple
/// platforms adds `gcm.message_id`, `google.c.a.e`, `google.c.sender.id`…, APNs adds `aps`,
/// Android's `RemoteMessage` may add `from`, `collapse_key`. A sender may not use these names
/// (FCM refuses data keys `from`, `message_type`, `notification` and any starting with
/// `google` or `gcm`), so they can only come from the provider: they are dropped here, and
/// everything else is kept for ``NotificationReader`` to judge.
public enum DataMap {
    /// Names a sender cannot use, which providers add.
    static let providerKeys: Set<String> = ["aps", "from", "message_type", "notification", "collapse_key", "fcm_options"]
    static let providerPrefixes = ["google", "gcm"]

    /// Whether `key` is a field the push provider added.
    public static func isProviderKey(_ key: String) -> Bool {
        providerKeys.contains(key) || providerPrefixes.contains { key.hasPrefix($0) }
    }

    /// The data map of an APNs or FCM notification's `userInfo` (Apple platforms): the string
    /// values under string keys, without the provider's own fields.
    public static func from(userInfo: [AnyHashable: Any]) -> [String: String] {
        var data: [String: String] = [:]
        for (key, value) in userInfo {
            guard let key = key.base as? String, !isProviderKey(key), let text = value as? String else { continue }
            data[key] = text
        }
        return data
    }

    /// A data map without the provider's own fields (Android's `RemoteMessage.data`, bridged).
    public static func from(_ received: [String: String]) -> [String: String] {
        received.filter { !isProviderKey($0.key) }
    }
}
