import Crypto
import Foundation

/// A Standard Webhooks secret (`whsec_` and the base64 of at least 16 random bytes), and the
/// check of a `webhook-signature` header with it.
struct WebhookSecretKey: Sendable {
    let key: SymmetricKey

    /// Reads a secret; the error never contains it.
    init(_ text: String) throws(NotificationError) {
        var encoded = Substring(text)
        if encoded.hasPrefix("whsec_") { encoded = encoded.dropFirst(6) }
        guard encoded.utf8.count <= 1024, let bytes = Data(base64Encoded: String(encoded)), bytes.count >= 16 else {
            throw .malformed("a webhook secret is \"whsec_\" followed by the base64 of at least 16 random bytes (Standard Webhooks)")
        }
        key = SymmetricKey(data: bytes)
    }

    /// The most signatures one header may list.
    static let maxSignatures = 16

    /// Whether one of the `v1,<base64>` signatures of `header` is the HMAC-SHA256 of
    /// `{id}.{timestamp}.{body}` (compared in constant time).
    func verifies(header: String, id: String, timestamp: String, body: [UInt8]) -> Bool {
        var signed = Array("\(id).\(timestamp).".utf8)
        signed += body
        var checked = 0
        for entry in header.split(separator: " ", omittingEmptySubsequences: true) {
            checked += 1
            if checked > Self.maxSignatures { return false }
            guard entry.hasPrefix("v1,"), let signature = Data(base64Encoded: String(entry.dropFirst(3))) else { continue }
            if HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signed, using: key) { return true }
        }
        return false
    }
}
