import Crypto
import PushCore

/// Subscription ids: derived from the 6-tuple, so the same tuple always has the same id.
///
/// `id` = the first 16 bytes of SHA-256(tuple.canonicalBytes), as 32 lowercase hexadecimal
/// digits. The canonical bytes length-prefix every field (see `SubscriptionTuple`), so distinct
/// tuples never encode alike; 128 bits of SHA-256 make accidental collisions negligible, and
/// crafted ones infeasible. Hexadecimal rather than base64url: an id never starts with `-`
/// (which command lines take for an option) and needs no escaping anywhere.
public enum SubscriptionID {
    public static func derive(_ tuple: SubscriptionTuple) -> String {
        let digest = SHA256.hash(data: tuple.canonicalBytes)
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(32)
        for byte in digest.prefix(16) {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
