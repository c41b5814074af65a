import Crypto
import Foundation
import PushCore
import PushJSON

/// The request bodies of each provider, spliced around the payload bytes the outbox holds
/// (the payload is never parsed again on the way out).
public enum ProviderMessages {
    /// An FCM HTTP v1 `messages:send` body: the device token, the data map (the stored v1/v2
    /// payload, a JSON object of strings), Android priority high, and the APNs settings that
    /// wake an Apple app in the background for a data-only message (`apns-push-type:
    /// background`, `apns-priority: "5"`, `aps.content-available: 1`, nothing visible).
    public static func fcm(token: String, data: [UInt8]) -> [UInt8] {
        var writer = JSONWriter(capacity: data.count + 256)
        writer.raw(#"{"message":{"token":"#)
        writer.writeString(token)
        writer.raw(#","data":"#)
        writer.raw(data)
        writer.raw(
            #","android":{"priority":"HIGH"},"apns":{"headers":{"apns-push-type":"background","apns-priority":"5"},"payload":{"aps":{"content-available":1}}}}}"#
        )
        return writer.bytes
    }

    /// An HMS Push Kit v1 `messages:send` body: `data` is the payload as a JSON string, `token`
    /// an array of one, Android urgency high.
    public static func hms(token: String, data: [UInt8]) -> [UInt8] {
        var writer = JSONWriter(capacity: data.count * 5 / 4 + 256)
        writer.raw(#"{"validate_only":false,"message":{"data":"#)
        data.withUnsafeBufferPointer { writer.writeEscaped($0) }
        writer.raw(#","android":{"urgency":"HIGH"},"token":["#)
        writer.writeString(token)
        writer.raw("]}}")
        return writer.bytes
    }

    /// A Push Kit v3 `messages:send` body for HarmonyOS (sent with `push-type: 6`, a
    /// background message): the payload as the string `extraData` the app receives, `target`
    /// a token array of one.
    public static func harmony(token: String, data: [UInt8]) -> [UInt8] {
        var writer = JSONWriter(capacity: data.count * 5 / 4 + 128)
        writer.raw(#"{"payload":{"extraData":"#)
        data.withUnsafeBufferPointer { writer.writeEscaped($0) }
        writer.raw(#"},"target":{"token":["#)
        writer.writeString(token)
        writer.raw("]}}")
        return writer.bytes
    }

    /// An APNs background push body: `aps` with `content-available: 1` and nothing visible,
    /// then the data map's members (the v1/v2 keys) beside it. 30 bytes more than the data map
    /// (``PayloadLimit/apnsOverhead``).
    public static func apns(data: [UInt8]) -> [UInt8] {
        var writer = JSONWriter(capacity: data.count + PayloadLimit.apnsOverhead + 2)
        writer.raw(#"{"aps":{"content-available":1}"#)
        if data.count > 2 {
            writer.raw(UInt8(ascii: ","))
            data.withUnsafeBufferPointer { writer.raw(UnsafeBufferPointer(rebasing: $0[1...])) }
        } else {
            writer.raw(UInt8(ascii: "}"))
        }
        return writer.bytes
    }

    /// The §8 webhook body: the stored body (everything but `id`) with `id` put first.
    public static func webhook(id: String, storedBody: [UInt8]) -> [UInt8] {
        var writer = JSONWriter(capacity: storedBody.count + id.utf8.count + 16)
        writer.raw(#"{"id":"#)
        writer.writeString(id)
        if storedBody.count > 2 {
            writer.raw(UInt8(ascii: ","))
            storedBody.withUnsafeBufferPointer { writer.raw(UnsafeBufferPointer(rebasing: $0[1...])) }
        } else {
            writer.raw(UInt8(ascii: "}"))
        }
        return writer.bytes
    }
}

/// A Standard Webhooks signing secret (`whsec_` + base64 of random bytes).
public struct WebhookSecret: Sendable {
    let key: SymmetricKey

    /// Reads a secret; the error never contains it.
    public init(_ text: String) throws(WebhookSecretError) {
        var encoded = Substring(text)
        if encoded.hasPrefix("whsec_") { encoded = encoded.dropFirst(6) }
        guard let bytes = Data(base64Encoded: String(encoded)), bytes.count >= 16 else {
            throw WebhookSecretError()
        }
        key = SymmetricKey(data: bytes)
    }

    /// The `webhook-signature` header of a message: `v1,` and the base64 HMAC-SHA256 of
    /// `{id}.{timestamp}.{body}`.
    public func signature(id: String, timestamp: Int64, body: [UInt8]) -> String {
        var hmac = HMAC<SHA256>(key: key)
        hmac.update(data: Array("\(id).\(timestamp).".utf8))
        hmac.update(data: body)
        return "v1," + Data(hmac.finalize()).base64EncodedString()
    }
}

public struct WebhookSecretError: Error, CustomStringConvertible {
    public init() {}

    public var description: String {
        "a webhook secret is \"whsec_\" followed by the base64 of at least 16 random bytes (Standard Webhooks)"
    }
}
