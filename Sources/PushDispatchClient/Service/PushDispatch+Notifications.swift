import PushJOSE

extension PushDispatch {
    /// Reads the data map of a push this device received (FCM's `RemoteMessage.data`, HMS's
    /// `data` parsed, an APNs `userInfo` through ``DataMap/from(userInfo:)``) into a checked
    /// notification.
    ///
    /// A v2 payload is verified with the application's keys (the service's public keys,
    /// fetched from `/.well-known/jwks.json` and cached, fetched again when a payload names a
    /// `kid` they lack; and the shared keys of the configuration) and decrypted with the
    /// device key or a shared key. What `pushdispatch decode` refuses is refused, with the
    /// same words; so is a genuine event of another application.
    ///
    /// A signature proves who sent an event, not to whom: check that the notification's
    /// ``PushNotification/path`` is one this device subscribed to.
    public func notification(from data: [String: String]) async throws(NotificationError) -> PushNotification {
        // A v1 payload (no ver) is neither signed nor encrypted: no keys to fetch for it.
        if data["ver"] == nil { return try NotificationReader(app: app, keys: []).read(data) }
        return try await read { reader throws(NotificationError) in try reader.read(data) }
    }

    /// Reads a data payload given as JSON text: HMS's `data` string, or a Web Push message's
    /// decrypted body.
    public func notification(fromJSON bytes: [UInt8]) async throws(NotificationError) -> PushNotification {
        try await read { reader throws(NotificationError) in try reader.read(json: bytes) }
    }

    /// Reads a data payload given as JSON text (HMS's `RemoteMessage.getData()`).
    public func notification(fromJSON text: String) async throws(NotificationError) -> PushNotification {
        try await notification(fromJSON: Array(text.utf8))
    }

    /// A reader with the keys known now: the service's public keys (fetched if need be), the
    /// shared keys and the device key. For apps that read notifications where no network is
    /// at hand (keep the reader); ``notification(from:)`` does the fetching itself.
    public func notificationReader() async throws(NotificationError) -> NotificationReader {
        let published: [JWK]
        do {
            published = try await publishedKeys.current()
        } catch {
            throw NotificationError(.keysUnavailable, "the service's public keys could not be fetched: \(error)")
        }
        return try await reader(published: published)
    }

    func reader(published: [JWK]) async throws(NotificationError) -> NotificationReader {
        let deviceKey: JWK?
        do {
            deviceKey = try await deviceKeys.key(create: false)
        } catch {
            throw NotificationError(.keysUnavailable, "the device key could not be read: \(error)")
        }
        // A kid the application shares wins over the same kid fetched from the service.
        let sharedKIDs = Set(sharedKeys.compactMap(\.kid))
        let fetched = published.filter { !sharedKIDs.contains($0.kid ?? "") }
        return try NotificationReader(app: app, keys: (deviceKey.map { [$0] } ?? []) + sharedKeys + fetched)
    }

    /// Reads with the current keys; on an unknown `kid`, fetches the service's keys again (at
    /// most every `keysRefetchInterval`) and reads once more.
    func read(_ body: (NotificationReader) throws(NotificationError) -> PushNotification) async throws(NotificationError) -> PushNotification {
        do {
            return try body(try await notificationReader())
        } catch let unknown where unknown.code == .unknownKey {
            let fetched: Bool
            do {
                fetched = try await publishedKeys.refetchForUnknownKey()
            } catch {
                throw NotificationError(.keysUnavailable, "\(unknown.message), and fetching the service's keys again failed: \(error)")
            }
            guard fetched else { throw unknown }
            return try body(try await notificationReader())
        }
    }
}
