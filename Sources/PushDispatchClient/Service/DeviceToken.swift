import Foundation
import PushCore
import PushJSON

/// The device's push token and the provider that issued it: where notifications
/// subscribed through ``DataNode/subscribeThroughNotifications(descriptor:)`` go.
///
/// It becomes the subscription's `kind` and `context` (SPEC §5). Build one with the static
/// functions, which check the token's shape before anything is sent:
///
/// ```swift
/// let device = try DeviceToken.fcm(registrationToken)          // Firebase Cloud Messaging
/// let device = try DeviceToken.hms(huaweiToken)                // Huawei Push Kit (Android)
/// let device = try DeviceToken.harmonyOS(pushToken)            // Push Kit on HarmonyOS 5+
/// let device = try DeviceToken.apns(deviceToken)               // APNs: the Data from iOS
/// let device = try DeviceToken.webPush(subscriptionJSON: text) // a browser's PushSubscription
/// ```
public struct DeviceToken: Sendable, Hashable, CustomStringConvertible {
    /// The provider that issued a device token.
    public enum Kind: String, Sendable, CaseIterable {
        /// Firebase Cloud Messaging (Android, and Apple devices through FCM): kind `mobile`.
        case fcm = "mobile"
        /// Huawei HMS Push Kit: kind `huawei`.
        case hms = "huawei"
        /// Huawei Push Kit v3 on HarmonyOS 5 and later: kind `harmonyos`.
        case harmonyOS = "harmonyos"
        /// Apple Push Notification service, directly: kind `apns`; the token in hexadecimal.
        case apns
        /// Web Push (RFC 8030): kind `webpush`; the browser's PushSubscription as JSON.
        case webPush = "webpush"

        /// The subscription `kind` the REST API knows it by.
        public var subscriptionKind: String { rawValue }
    }

    /// Longest token accepted, in bytes (the server's limit on `context`).
    public static let maxBytes = 4096

    /// Which provider issued the token.
    public let kind: Kind
    /// The token as the subscription's `context` carries it.
    public let value: String

    /// A token as the service returned it (not checked again).
    init(kind: Kind, value: String) {
        self.kind = kind
        self.value = value
    }

    /// An FCM registration token.
    public static func fcm(_ token: String) throws(PushClientError) -> DeviceToken {
        DeviceToken(kind: .fcm, value: try checkedOpaque(token, what: "an FCM registration token"))
    }

    /// An HMS Push Kit token.
    public static func hms(_ token: String) throws(PushClientError) -> DeviceToken {
        DeviceToken(kind: .hms, value: try checkedOpaque(token, what: "an HMS token"))
    }

    /// A HarmonyOS push token, as `pushService.getToken()` (`@kit.PushKit`) gives it. Its
    /// length is not fixed (Huawei: do not rely on it); it is checked as an opaque token.
    public static func harmonyOS(_ token: String) throws(PushClientError) -> DeviceToken {
        DeviceToken(kind: .harmonyOS, value: try checkedOpaque(token, what: "a HarmonyOS push token"))
    }

    /// An APNs device token, as `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)`
    /// gives it; sent in lowercase hexadecimal.
    public static func apns(_ deviceToken: Data) throws(PushClientError) -> DeviceToken {
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(deviceToken.count * 2)
        for byte in deviceToken {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0xF)])
        }
        return try apns(hex: String(decoding: hex, as: UTF8.self))
    }

    /// An APNs device token in hexadecimal (either case; sent in lowercase): 16 to 200 digits,
    /// an even number (a token of 8 to 100 bytes; 64 digits today),
    /// as the service accepts (SPEC §5, `apns`).
    public static func apns(hex: String) throws(PushClientError) -> DeviceToken {
        do {
            return DeviceToken(kind: .apns, value: try APNsDeviceToken.canonical(hex))
        } catch {
            throw .invalidArgument("\(error.message) (got \(Bounded.quoted(hex)))")
        }
    }

    /// A Web Push subscription: the JSON of the browser's `PushSubscription`
    /// (`JSON.stringify(subscription)`: `{"endpoint":"https://…","expirationTime":null,"keys":{"p256dh":"…","auth":"…"}}`),
    /// sent in the canonical form the service keeps, `{"endpoint":…,"keys":{"auth":…,"p256dh":…}}`,
    /// so that the same browser subscription always names the same device, here and in the
    /// subscriptions the service lists.
    public static func webPush(subscriptionJSON text: String) throws(PushClientError) -> DeviceToken {
        guard text.utf8.count <= maxBytes * 2 else {
            throw .invalidArgument("a Web Push subscription is at most \(maxBytes) bytes of JSON; this one has \(text.utf8.count)")
        }
        let json: JSON
        do {
            json = try JSONParser.parseRejectingDuplicateKeys(Array(text.utf8))
        } catch {
            throw .invalidArgument("the Web Push subscription is not JSON: \(error)")
        }
        let subscription: WebPushContext
        do {
            subscription = try WebPushContext(json)
        } catch {
            throw .invalidArgument("the Web Push subscription: \(error.message)")
        }
        guard subscription.endpoint.hasPrefix("https://"), subscription.endpoint.utf8.count > 8 else {
            throw .invalidArgument("a Web Push subscription has an \"endpoint\": the push service's https:// URL")
        }
        guard !subscription.p256dh.isEmpty, !subscription.auth.isEmpty else {
            throw .invalidArgument("a Web Push subscription has \"keys\" with \"p256dh\" and \"auth\" (RFC 8291)")
        }
        let canonical = subscription.canonicalText
        guard canonical.utf8.count <= maxBytes else {
            throw .invalidArgument("a Web Push subscription is at most \(maxBytes) bytes of compact JSON; this one has \(canonical.utf8.count)")
        }
        return DeviceToken(kind: .webPush, value: canonical)
    }

    /// A token whose shape this client does not know: 1 to 4096 bytes of printable ASCII.
    static func checkedOpaque(_ token: String, what: String) throws(PushClientError) -> String {
        let bytes = token.utf8
        guard !bytes.isEmpty, bytes.count <= maxBytes, bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalidArgument(
                "\(what) is 1 to \(maxBytes) printable ASCII characters without spaces, got \(bytes.count) bytes")
        }
        return token
    }

    /// The kind and a short prefix of the token (never the whole of it).
    public var description: String {
        "\(kind.rawValue) device \(Bounded.text(value, limit: 12))"
    }
}
