import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import PushCore
import PushJSON
import PushJOSE

/// A browser's subscription, as the fake push service and the browser behind it keep it.
struct WebPushSubscriber: Sendable {
    /// The browser's P-256 private key (raw 32 bytes) and public key (65-byte point, `p256dh`).
    var privateKey: [UInt8]
    var publicKey: [UInt8]
    /// The 16-byte authentication secret (`auth`).
    var authSecret: [UInt8]
}

/// A push service (RFC 8030) and the browser behind it (RFC 8291), as the fakes play them:
/// `POST /push/{name}` for the subscriptions ``webPushSubscription(_:)`` made.
///
/// It checks a push in this order and answers the first fault with a recorded body
/// (`fixtures/providers/webpush-*.json`: Mozilla autopush's error JSON, Apple's
/// `{"reason":"BadJwtToken"}` for VAPID refusals):
/// 1. An unknown subscription → 404 (RFC 8030 §7.3: expired). A script can answer 410.
/// 2. `Authorization`: absent, or not the `vapid` scheme → 401. `vapid t=<JWT>, k=<key>` (also
///    `,k=`): `k` a P-256 point, equal to the key of ``setWebPushVAPIDKey(_:)`` when one is set
///    (a subscription made under another key); the JWT with `alg` ES256, signed by `k`, `aud`
///    exactly this service's origin (``webPushOrigin``), `exp` after now and at most 24 hours
///    ahead (the fake's clock), `sub` a `mailto:` or `https:` URI with no space or angle
///    brackets and not an address at `localhost` (Apple's push service refuses those) → else
///    403 `BadJwtToken`.
/// 3. `TTL`: one value, a non-negative integer → else 400 (RFC 8030 §5.2); the answer's `TTL`
///    is that value, lowered to 60 days as autopush does.
/// 4. `Urgency`, when present: one of `very-low`, `low`, `normal`, `high` → else 400.
/// 5. `Topic`, when present: 1 to 32 characters of the base64url alphabet → else 400.
/// 6. `Content-Encoding` exactly `aes128gcm` (missing or `aesgcm` included) → else 400, as
///    autopush answers (errno 110).
/// 7. The body at most 4,096 bytes → else 413.
/// 8. The body decrypts with the subscriber's keys (RFC 8291: one record, an 86-byte header
///    whose key id is the sender's 65-byte public key, the `0x02` delimiter) → else 400. A
///    real push service cannot tell (the browser drops such a message); the fake refuses it so
///    that a test sees the fault. A push without a body is refused the same way: pushdispatch
///    always sends a payload.
///
/// Then the subscription's script, if any, else 201 Created with `Location: /message/<n>` and
/// `TTL`. Every push is recorded: `target` the subscription's name, `data` the plaintext, `raw`
/// the body as received.
extension FakeProviders {
    /// The origin of the push resources, what a VAPID `aud` must be: `https://localhost:PORT`
    /// (or `http://127.0.0.1:PORT` without TLS).
    public var webPushOrigin: String { baseURL }

    /// Makes a browser subscription `name` (a path segment: letters, digits, `-`, `_`, `.`): a
    /// fresh P-256 key pair and 16-byte auth secret kept by the fake, replacing any earlier
    /// subscription of that name. Returns the `PushSubscription` JSON text
    /// `{"endpoint":"<baseURL>/push/<name>","keys":{"p256dh":…,"auth":…}}`.
    public func webPushSubscription(_ name: String) -> String {
        precondition(
            !name.isEmpty && name.utf8.allSatisfy { Self.isBase64URL($0) || $0 == UInt8(ascii: ".") },
            "a subscription name is one path segment (letters, digits, -, _, .)")
        let key = P256.KeyAgreement.PrivateKey()
        let subscriber = WebPushSubscriber(
            privateKey: [UInt8](key.rawRepresentation), publicKey: [UInt8](key.publicKey.x963Representation),
            authSecret: (0..<16).map { _ in UInt8.random(in: 0...255) })
        state.withLock { $0.webPushSubscribers[name] = subscriber }
        var writer = JSONWriter()
        writer.raw("{\"endpoint\":")
        writer.writeString(baseURL + "/push/" + name)
        writer.raw(",\"keys\":{\"p256dh\":")
        writer.writeString(Base64URL.encodeToString(subscriber.publicKey))
        writer.raw(",\"auth\":")
        writer.writeString(Base64URL.encodeToString(subscriber.authSecret))
        writer.raw("}}")
        return writer.string
    }

    /// The subscriber's private key (raw 32 bytes) and auth secret, base64url, for decrypting
    /// independently in tests (Python `http_ece`); `nil` for an unknown subscription.
    public func webPushSubscriberSecrets(_ name: String) -> (privateKey: String, auth: String)? {
        guard let subscriber = state.withLock({ $0.webPushSubscribers[name] }) else { return nil }
        return (Base64URL.encodeToString(subscriber.privateKey), Base64URL.encodeToString(subscriber.authSecret))
    }

    /// The browser unsubscribed: pushes to `name` are answered 404.
    public func removeWebPushSubscription(_ name: String) {
        _ = state.withLock { $0.webPushSubscribers.removeValue(forKey: name) }
    }

    /// The VAPID public key (`k`, base64url) the subscriptions were made under: a push signed
    /// with another is refused 403. `nil` (the default) takes any key that verifies.
    public func setWebPushVAPIDKey(_ publicKeyBase64URL: String?) {
        let key = publicKeyBase64URL.map { Base64URL.decode($0) ?? Array($0.utf8) }
        state.withLock { $0.webPushVAPIDKey = key }
    }

    /// The longest TTL kept (seconds): autopush's 60 days.
    static let webPushMaximumTTL: Int64 = 60 * 86_400
    static let webPushMaximumBody = 4_096
    static let webPushUrgencies: Set<String> = ["very-low", "low", "normal", "high"]

    func webPush(_ request: Request, name: String) async throws -> Response {
        let arrived = clock.now
        let arrivedMicros = Self.wallMicros()
        let bytes = try await body(request)
        guard let subscriber = state.withLock({ $0.webPushSubscribers[name] }) else {
            record("webpush", name, [], 404, request, raw: bytes)
            return respond("webpush-not-found")
        }
        let ttl: Int64
        switch webPushCheck(request, body: bytes) {
        case .failure(let refusal):
            record("webpush", name, [], refusal.status, request, raw: bytes)
            return respond(refusal.name)
        case .success(let value):
            ttl = value
        }
        guard let plaintext = Self.decryptWebPush(bytes, privateKey: subscriber.privateKey, authSecret: subscriber.authSecret) else {
            record("webpush", name, [], 400, request, raw: bytes)
            return respond("webpush-undecryptable")
        }
        if let scripted = await next(name) {
            let status = Self.status(of: scripted)
            record("webpush", name, plaintext, status, request, arrived: arrived, arrivedMicros: arrivedMicros, raw: bytes)
            return status == 201 ? created(scripted, ttl: ttl) : scripted
        }
        record("webpush", name, plaintext, 201, request, arrived: arrived, arrivedMicros: arrivedMicros, raw: bytes)
        return created(respond("webpush-created"), ttl: ttl)
    }

    struct WebPushRefusal: Error {
        var name: String
        var status: Int { ProviderFixtures.answer(name).status }
    }

    /// The TTL to keep the message for, or the recorded answer of the first fault.
    func webPushCheck(_ request: Request, body: [UInt8]) -> Result<Int64, WebPushRefusal> {
        if let refusal = checkVAPID(request.headers[.authorization]) { return .failure(WebPushRefusal(name: refusal)) }
        let ttlValues = request.headers[values: HTTPField.Name("ttl")!]
        guard ttlValues.count == 1, let text = ttlValues.first, !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return .failure(WebPushRefusal(name: "webpush-missing-ttl"))
        }
        // All digits: only too many of them fails to parse, and that is more than the cap.
        let ttl = min(Int64(text) ?? Self.webPushMaximumTTL, Self.webPushMaximumTTL)
        let urgency = request.headers[values: HTTPField.Name("urgency")!]
        guard urgency.count <= 1, urgency.allSatisfy({ Self.webPushUrgencies.contains($0) }) else {
            return .failure(WebPushRefusal(name: "webpush-bad-urgency"))
        }
        let topic = request.headers[values: HTTPField.Name("topic")!]
        guard topic.count <= 1, topic.allSatisfy({ (1...32).contains($0.utf8.count) && $0.utf8.allSatisfy(Self.isBase64URL) }) else {
            return .failure(WebPushRefusal(name: "webpush-bad-topic"))
        }
        let encoding = request.headers[values: .contentEncoding]
        guard encoding.count == 1, encoding[0].lowercased() == "aes128gcm" else { return .failure(WebPushRefusal(name: "webpush-bad-encoding")) }
        guard body.count <= Self.webPushMaximumBody else { return .failure(WebPushRefusal(name: "webpush-too-large")) }
        return .success(ttl)
    }

    /// Why the push service would refuse the `Authorization` header (a recorded answer), or
    /// `nil`.
    func checkVAPID(_ authorization: String?) -> String? {
        guard let authorization, authorization.utf8.count > 6, authorization.prefix(6).lowercased() == "vapid " else {
            return "webpush-unauthorized"
        }
        var token: String?
        var keyText: String?
        for part in authorization.dropFirst(6).split(separator: ",") {
            let field = part.trimmingCharacters(in: .whitespaces)
            if field.hasPrefix("t=") { token = String(field.dropFirst(2)) } else if field.hasPrefix("k=") { keyText = String(field.dropFirst(2)) }
        }
        guard let token, let keyText, let point = Base64URL.decode(keyText), point.count == 65,
            let key = try? P256.Signing.PublicKey(x963Representation: point)
        else { return "webpush-bad-jwt" }
        if let expected = state.withLock({ $0.webPushVAPIDKey }), expected != point { return "webpush-bad-jwt" }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])), let claimBytes = Base64URL.decode(String(parts[1])),
            let signatureBytes = Base64URL.decode(String(parts[2])), let header = try? JSONParser.parse(headerBytes),
            let claims = try? JSONParser.parse(claimBytes), header["alg"]?.stringValue == "ES256",
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            key.isValidSignature(signature, for: Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8))
        else { return "webpush-bad-jwt" }
        let now = clock.now / 1000
        guard claims["aud"]?.stringValue == webPushOrigin, let expiresAt = claims["exp"]?.integerValue, expiresAt > now,
            expiresAt.saturatingSubtracting(now) <= 86_400, let subject = claims["sub"]?.stringValue, Self.isContact(subject)
        else { return "webpush-bad-jwt" }
        return nil
    }

    /// A `mailto:` or `https:` URI Apple's push service takes: no white space or angle
    /// brackets (`mailto: <x@y>` is refused), and a mail domain other than `localhost`.
    static func isContact(_ subject: String) -> Bool {
        guard !subject.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0 == "<" || $0 == ">" }) else { return false }
        if subject.hasPrefix("mailto:") {
            let address = subject.dropFirst(7)
            guard let at = address.lastIndex(of: "@"), at != address.startIndex else { return false }
            let domain = address[address.index(after: at)...].lowercased()
            return !domain.isEmpty && domain != "localhost" && !domain.hasSuffix(".localhost")
        }
        return subject.hasPrefix("https://") && subject.utf8.count > 8
    }

    static func isBase64URL(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
    }

    /// A 201 with the message's `Location` and the TTL kept.
    func created(_ response: Response, ttl: Int64) -> Response {
        let number = state.withLock { state -> Int in
            state.webPushMessages += 1
            return state.webPushMessages
        }
        var response = response
        response.headers[.location] = "/message/\(number)"
        response.headers[HTTPField.Name("ttl")!] = String(ttl)
        response.headers[.contentType] = nil
        return response
    }

    /// The browser's side of RFC 8291, written apart from the service's: the plaintext of an
    /// `aes128gcm` body of one record, or `nil` when it is not one for this subscriber.
    static func decryptWebPush(_ body: [UInt8], privateKey: [UInt8], authSecret: [UInt8]) -> [UInt8]? {
        // salt (16) | rs (4) | idlen (1) = 65 | keyid: the sender's public key (65) | record
        guard body.count >= 86 + 16 + 1, body[20] == 65 else { return nil }
        let salt = Array(body[0..<16])
        let recordSize = Int(body[16]) << 24 | Int(body[17]) << 16 | Int(body[18]) << 8 | Int(body[19])
        let senderPublic = Array(body[21..<86])
        let record = Array(body[86...])
        // One record: RFC 8188 needs rs ≥ 18; RFC 8291 §4 puts the whole message in one.
        guard recordSize >= 18, record.count <= recordSize,
            let receiver = try? P256.KeyAgreement.PrivateKey(rawRepresentation: privateKey),
            let sender = try? P256.KeyAgreement.PublicKey(x963Representation: senderPublic),
            let shared = try? receiver.sharedSecretFromKeyAgreement(with: sender)
        else { return nil }
        let ecdh = shared.withUnsafeBytes { [UInt8]($0) }
        let receiverPublic = [UInt8](receiver.publicKey.x963Representation)
        // HKDF with SHA-256, each output one HMAC block (RFC 5869: T(1) = HMAC(PRK, info | 0x01)).
        func hmac(_ key: [UInt8], _ data: [UInt8]) -> [UInt8] {
            [UInt8](HMAC<SHA256>.authenticationCode(for: data, using: SymmetricKey(data: key)))
        }
        let keyPRK = hmac(authSecret, ecdh)
        let ikm = hmac(keyPRK, Array("WebPush: info".utf8) + [0] + receiverPublic + senderPublic + [1])
        let prk = hmac(salt, ikm)
        let cek = Array(hmac(prk, Array("Content-Encoding: aes128gcm".utf8) + [0, 1]).prefix(16))
        let nonce = Array(hmac(prk, Array("Content-Encoding: nonce".utf8) + [0, 1]).prefix(12))
        guard let box = try? AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: nonce), ciphertext: record.dropLast(16), tag: record.suffix(16)),
            let padded = try? AES.GCM.open(box, using: SymmetricKey(data: cek))
        else { return nil }
        // The plaintext, the last record's delimiter 0x02, then zero padding.
        let plain = [UInt8](padded)
        guard let delimiter = plain.lastIndex(where: { $0 != 0 }), plain[delimiter] == 0x02 else { return nil }
        return Array(plain[..<delimiter])
    }
}
