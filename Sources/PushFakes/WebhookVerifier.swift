import Crypto
import Foundation
import PushJOSE

public struct WebhookVerifier: Sendable {
    let key: SymmetricKey

    public init(_ secret: String) throws {
        var encoded = Substring(secret)
        if encoded.hasPrefix("whsec_") { encoded = encoded.dropFirst(6) }
        guard let bytes = Data(base64Encoded: String(encoded)) else { throw CocoaError(.coderInvalidValue) }
        key = SymmetricKey(data: bytes)
    }

    /// Whether one of the `v1,` signatures of `header` is the HMAC of `{id}.{timestamp}.{body}`.
    public func verify(id: String, timestamp: Int64, body: [UInt8], header: String) -> Bool {
        var hmac = HMAC<SHA256>(key: key)
        hmac.update(data: Array("\(id).\(timestamp).".utf8))
        hmac.update(data: body)
        let expected = "v1," + Data(hmac.finalize()).base64EncodedString()
        return header.split(separator: " ").contains { $0 == expected }
    }
}
