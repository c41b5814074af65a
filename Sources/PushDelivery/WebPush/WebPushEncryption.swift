import Crypto
import Foundation
import PushJOSE

/// A browser's push subscription keys (`PushSubscription.keys`): its P-256 public key
/// (`p256dh`, the 65-byte uncompressed point) and its 16-byte authentication secret (`auth`),
/// both base64url as the browser gives them.
public struct WebPushSubscriberKeys: Sendable {
    public let publicKey: P256.KeyAgreement.PublicKey
    public let authSecret: [UInt8]

    /// What is wrong with a subscriber's keys, saying which one and what was expected.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    public init(p256dh: String, auth: String) throws(Invalid) {
        guard let point = Base64URL.decode(p256dh) else { throw Invalid(description: "keys.p256dh: expected base64url text") }
        guard point.count == 65, point[0] == 0x04 else {
            throw Invalid(description: "keys.p256dh: expected the 65-byte uncompressed P-256 point (0x04 first), got \(point.count) bytes")
        }
        guard let key = try? P256.KeyAgreement.PublicKey(x963Representation: point) else {
            throw Invalid(description: "keys.p256dh: not a point of the P-256 curve")
        }
        guard let secret = Base64URL.decode(auth) else { throw Invalid(description: "keys.auth: expected base64url text") }
        guard secret.count == 16 else { throw Invalid(description: "keys.auth: expected 16 bytes, got \(secret.count)") }
        publicKey = key
        authSecret = secret
    }

    public init(publicKey: P256.KeyAgreement.PublicKey, authSecret: [UInt8]) {
        self.publicKey = publicKey
        self.authSecret = authSecret
    }
}

/// Message encryption for Web Push (RFC 8291): `aes128gcm` content coding (RFC 8188), one
/// record, the sender's ephemeral public key as the key id. The body is the 86-byte header
/// (salt, record size, key id length, key id), then the ciphertext of the plaintext followed by
/// the `0x02` delimiter, then the 16-byte tag.
public enum WebPushEncryption {
    /// Salt (16) + record size (4) + key id length (1) + the sender's public key (65).
    public static let headerLength = 86
    public static let tagLength = 16
    /// The record size written in the header: push services need accept no more than 4,096
    /// bytes of body (RFC 8030 §7.2).
    public static let recordSize = 4_096
    /// The longest plaintext one 4,096-byte body carries: 4,096 − 86 − 1 − 16 = 3,993.
    public static let maximumPlaintext = recordSize - headerLength - 1 - tagLength

    public struct Failure: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Encrypts `plaintext` for a subscriber. `salt` and `senderKey` are random unless given
    /// (tests give the RFC's).
    public static func encrypt(
        _ plaintext: [UInt8], for subscriber: WebPushSubscriberKeys, salt: [UInt8]? = nil, senderKey: P256.KeyAgreement.PrivateKey? = nil
    ) throws(Failure) -> [UInt8] {
        guard plaintext.count <= maximumPlaintext else {
            throw Failure(description: "a Web Push message holds at most \(maximumPlaintext) bytes of plaintext, got \(plaintext.count)")
        }
        let salt = salt ?? (0..<16).map { _ in UInt8.random(in: 0...255) }
        guard salt.count == 16 else { throw Failure(description: "the salt must be 16 bytes, got \(salt.count)") }
        let senderKey = senderKey ?? P256.KeyAgreement.PrivateKey()
        let senderPublic = [UInt8](senderKey.publicKey.x963Representation)
        let (key, nonce) = try derive(
            privateKey: senderKey, peer: subscriber.publicKey, authSecret: subscriber.authSecret, salt: salt,
            subscriberPublic: [UInt8](subscriber.publicKey.x963Representation), senderPublic: senderPublic)
        var record = plaintext
        record.append(0x02)  // the last (and only) record's delimiter, no padding
        let sealed: AES.GCM.SealedBox
        do {
            sealed = try AES.GCM.seal(record, using: key, nonce: nonce)
        } catch {
            throw Failure(description: "AES-GCM refused to seal: \(error)")
        }
        var body: [UInt8] = []
        body.reserveCapacity(headerLength + record.count + tagLength)
        body += salt
        body += [UInt8(recordSize >> 24 & 0xFF), UInt8(recordSize >> 16 & 0xFF), UInt8(recordSize >> 8 & 0xFF), UInt8(recordSize & 0xFF)]
        body.append(UInt8(senderPublic.count))
        body += senderPublic
        body += sealed.ciphertext
        body += sealed.tag
        return body
    }

    /// Decrypts a body (the subscriber's side: the fake push service, tests). Refuses, saying
    /// why, a header that does not parse, a record size it breaks, another key id than a P-256
    /// point, a tag that does not verify, a missing or wrong delimiter.
    public static func decrypt(_ body: [UInt8], privateKey: P256.KeyAgreement.PrivateKey, authSecret: [UInt8]) throws(Failure) -> [UInt8] {
        guard authSecret.count == 16 else { throw Failure(description: "the auth secret must be 16 bytes, got \(authSecret.count)") }
        guard body.count >= 21 else { throw Failure(description: "the body is \(body.count) bytes, shorter than the aes128gcm header (21 bytes and a key id)") }
        let salt = Array(body[0..<16])
        let recordSize = body[16..<20].reduce(0) { $0 << 8 | Int($1) }
        let idLength = Int(body[20])
        guard idLength == 65 else { throw Failure(description: "the key id is \(idLength) bytes; Web Push puts the sender's 65-byte public key there") }
        guard body.count >= 21 + idLength + tagLength + 1 else {
            throw Failure(description: "the body is \(body.count) bytes: no room for a record after the \(21 + idLength)-byte header")
        }
        let senderPoint = Array(body[21..<(21 + idLength)])
        guard let senderPublic = try? P256.KeyAgreement.PublicKey(x963Representation: senderPoint) else {
            throw Failure(description: "the key id is not a P-256 public key")
        }
        let record = body[(21 + idLength)...]
        guard recordSize >= 18, record.count <= recordSize else {
            throw Failure(description: "the record is \(record.count) bytes for a record size of \(recordSize): one record only")
        }
        let (key, nonce) = try derive(
            privateKey: privateKey, peer: senderPublic, authSecret: authSecret, salt: salt,
            subscriberPublic: [UInt8](privateKey.publicKey.x963Representation), senderPublic: senderPoint)
        let plain: [UInt8]
        do {
            let box = try AES.GCM.SealedBox(nonce: nonce, ciphertext: record.dropLast(tagLength), tag: record.suffix(tagLength))
            plain = [UInt8](try AES.GCM.open(box, using: key))
        } catch {
            throw Failure(description: "the record does not decrypt (another key or auth secret, or altered bytes)")
        }
        // Padding is zeros after the delimiter; the last record's delimiter is 0x02.
        guard let delimiter = plain.lastIndex(where: { $0 != 0 }), plain[delimiter] == 0x02 else {
            throw Failure(description: "the record lacks the last-record delimiter 0x02")
        }
        return Array(plain[..<delimiter])
    }

    /// The content-encryption key and nonce (RFC 8291 §3.4, RFC 8188 §2.2-2.3).
    static func derive(
        privateKey: P256.KeyAgreement.PrivateKey, peer: P256.KeyAgreement.PublicKey, authSecret: [UInt8], salt: [UInt8],
        subscriberPublic: [UInt8], senderPublic: [UInt8]
    ) throws(Failure) -> (SymmetricKey, AES.GCM.Nonce) {
        let shared: SharedSecret
        do {
            shared = try privateKey.sharedSecretFromKeyAgreement(with: peer)
        } catch {
            throw Failure(description: "the P-256 key agreement failed: \(error)")
        }
        let ecdh = shared.withUnsafeBytes { SymmetricKey(data: $0) }
        // PRK_key = HMAC-SHA-256(auth_secret, ecdh_secret); IKM = HKDF-Expand(PRK_key, key_info, 32)
        let keyPRK = HKDF<SHA256>.extract(inputKeyMaterial: ecdh, salt: authSecret)
        let keyInfo = Array("WebPush: info".utf8) + [0] + subscriberPublic + senderPublic
        let ikm = HKDF<SHA256>.expand(pseudoRandomKey: keyPRK, info: keyInfo, outputByteCount: 32)
        // PRK = HMAC-SHA-256(salt, IKM); CEK and NONCE expanded from it.
        let prk = HKDF<SHA256>.extract(inputKeyMaterial: ikm, salt: salt)
        let cek = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Array("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
        let nonceBytes = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Array("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
        do {
            return (cek, try nonceBytes.withUnsafeBytes { try AES.GCM.Nonce(data: $0) })
        } catch {
            throw Failure(description: "the nonce cannot be made: \(error)")
        }
    }
}
