import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import PushCore
import PushJSON
import PushJOSE

/// The APNs provider API the fakes play (`POST /3/device/{token}`; HTTP/2 over TLS when the
/// fakes are started with `tls`), for one team whose `.p8` key is made at start.
///
/// It checks a request as APNs does, in this order, and answers the first fault with Apple's
/// recorded body `{"reason": …}` (`fixtures/providers/apns-*.json`) and an `apns-id`:
/// 1. `authorization: bearer <JWT>`: missing → 403 `MissingProviderToken`; not three base64url
///    parts, `alg` not ES256, `kid` not ``apnsKeyID``, a signature that does not verify with the
///    team key, `iss` not ``apnsTeamID``, no `iat` → 403 `InvalidProviderToken`; `iat` more than
///    an hour old or more than a minute ahead (the fake's clock) → 403 `ExpiredProviderToken`.
///    `iat` may be a number or, as APNSwift writes it, a string of digits: APNs takes both.
///    APNs counts token updates per team: a token whose `iat` is newer than the current one's
///    by less than 20 minutes → 429 `TooManyProviderTokenUpdates`; a newer one past that
///    becomes the current one; an older, still valid one is accepted and changes nothing.
/// 2. A header given twice (`authorization`, `apns-*`) → 400 `DuplicateHeaders`.
/// 3. `apns-id`, when present, a canonical UUID → else 400 `BadMessageId`.
/// 4. The device token: 64 to 200 hex digits, an even number → else 400 `BadDeviceToken`.
/// 5. `apns-topic`: missing → 400 `MissingTopic`; not ``apnsTopic`` → 400 `TopicDisallowed`.
/// 6. `apns-push-type` must be `background` (the fake takes background pushes only) → else
///    400 `InvalidPushType`.
/// 7. `apns-priority` must be `5` (absent means 10, an error for a background push) → else
///    400 `BadPriority`.
/// 8. `apns-expiration`, when present, an integer → else 400 `BadExpirationDate`;
///    `apns-collapse-id` at most 64 bytes → else 400 `BadCollapseId`.
/// 9. The body at most 4,096 bytes → else 413 `PayloadTooLarge`.
/// 10. The body a JSON object whose `aps` holds `content-available: 1` → else 400
///    `PayloadEmpty` (nothing a background push can deliver); `aps` with an `alert`, `sound` or
///    `badge` → 400 `InvalidPushType` (the payload is not a background push, the type says it
///    is); every other top-level member a string → else 400 `PayloadEmpty`. (APNs itself
///    would deliver other custom values; pushdispatch's data keys are strings, so the fake holds
///    the sender to that.)
///
/// Then the device token's script, if any (``script(_:_:)``: `DeviceTokenNotForTopic`,
/// `Unregistered`, 429, 5xx …), else 200 with an empty body. Every request is recorded with
/// the body as sent.
extension FakeProviders {
    /// The fake team's id (Apple's 10 upper-case letters and digits).
    public static let apnsTeamID = "TEAM012345"
    /// The id of the team's key (`kid`).
    public static let apnsKeyID = "KEY0123456"
    /// The app's bundle id, the only topic the key may push to.
    public static let apnsTopic = "com.example.pushdispatch"

    /// Where the service sends (`<endpoint>/3/device/<token>`).
    public var apnsEndpoint: String { baseURL }
    /// The team's `.p8` key (PKCS #8 PEM, P-256), made at start: the service is configured
    /// with it.
    public var apnsPrivateKeyPEM: String { apnsKey.pemRepresentation }

    static let apnsMaximumPayload = 4_096
    /// A provider token is refused this many seconds after its `iat`.
    static let apnsTokenLifetime: Int64 = 3_600
    /// APNs refuses token updates more frequent than this (seconds), per team.
    static let apnsTokenUpdateInterval: Int64 = 20 * 60
    static let apnsHeaders = [
        "authorization", "apns-id", "apns-topic", "apns-push-type", "apns-priority", "apns-expiration", "apns-collapse-id",
    ].map { HTTPField.Name($0)! }
    static let apnsIDField = HTTPField.Name("apns-id")!

    func apns(_ request: Request, token: String) async throws -> Response {
        let arrived = clock.now
        let arrivedMicros = Self.wallMicros()
        let bytes = try await body(request)
        let given = request.headers[Self.apnsIDField]
        let apnsID = given.flatMap { Self.isCanonicalUUID($0) ? $0 : nil } ?? UUID().uuidString.lowercased()
        if let refusal = apnsRefusal(request, token: token, body: bytes) {
            record("apns", token, bytes, ProviderFixtures.answer(refusal).status, request)
            return Self.apnsAnswer(respond(refusal), apnsID: apnsID)
        }
        if let scripted = await next(token) {
            record("apns", token, bytes, Self.status(of: scripted), request, arrived: arrived, arrivedMicros: arrivedMicros)
            return Self.apnsAnswer(scripted, apnsID: apnsID)
        }
        record("apns", token, bytes, 200, request, arrived: arrived, arrivedMicros: arrivedMicros)
        return Self.apnsAnswer(respond("apns-success"), apnsID: apnsID)
    }

    /// The recorded answer (`apns-…`) for the first fault of the request, or `nil`.
    func apnsRefusal(_ request: Request, token: String, body: [UInt8]) -> String? {
        if let refusal = checkProviderToken(request.headers[.authorization]) { return refusal }
        for name in Self.apnsHeaders where request.headers[values: name].count > 1 { return "apns-duplicate-headers" }
        if let id = request.headers[Self.apnsIDField], !Self.isCanonicalUUID(id) { return "apns-bad-message-id" }
        let hex = token.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }
        guard hex, (64...200).contains(token.utf8.count), token.utf8.count % 2 == 0 else { return "apns-bad-device-token" }
        guard let topic = request.headers[HTTPField.Name("apns-topic")!] else { return "apns-missing-topic" }
        guard topic == Self.apnsTopic else { return "apns-topic-disallowed" }
        guard request.headers[HTTPField.Name("apns-push-type")!] == "background" else { return "apns-invalid-push-type" }
        guard request.headers[HTTPField.Name("apns-priority")!] == "5" else { return "apns-bad-priority" }
        if let expiration = request.headers[HTTPField.Name("apns-expiration")!], Int64(expiration) == nil { return "apns-bad-expiration-date" }
        if let collapse = request.headers[HTTPField.Name("apns-collapse-id")!], collapse.utf8.count > 64 { return "apns-bad-collapse-id" }
        guard body.count <= Self.apnsMaximumPayload else { return "apns-payload-too-large" }
        guard let json = try? JSONParser.parse(body), case .object(let members) = json, let aps = json["aps"], case .object = aps,
            aps["content-available"]?.integerValue == 1
        else { return "apns-payload-empty" }
        if aps["alert"] != nil || aps["sound"] != nil || aps["badge"] != nil { return "apns-invalid-push-type" }
        for member in members where member.key.string != "aps" {
            guard case .string = member.value else { return "apns-payload-empty" }
        }
        return nil
    }

    /// Why APNs would refuse the provider token in `authorization`, or `nil` (then the token
    /// counts for the team's updates).
    func checkProviderToken(_ authorization: String?) -> String? {
        guard let authorization else { return "apns-missing-provider-token" }
        guard authorization.utf8.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return "apns-invalid-provider-token" }
        let parts = authorization.dropFirst(7).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])), let claimBytes = Base64URL.decode(String(parts[1])),
            let signatureBytes = Base64URL.decode(String(parts[2])), let header = try? JSONParser.parse(headerBytes),
            let claims = try? JSONParser.parse(claimBytes)
        else { return "apns-invalid-provider-token" }
        guard header["alg"]?.stringValue == "ES256", header["kid"]?.stringValue == Self.apnsKeyID else { return "apns-invalid-provider-token" }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            apnsKey.publicKey.isValidSignature(signature, for: Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8))
        else { return "apns-invalid-provider-token" }
        guard claims["iss"]?.stringValue == Self.apnsTeamID else { return "apns-invalid-provider-token" }
        // APNSwift writes `iat` as a string of digits, and APNs takes it.
        guard let issuedAt = claims["iat"]?.integerValue ?? claims["iat"]?.stringValue.flatMap({ Int64($0) }) else {
            return "apns-invalid-provider-token"
        }
        let now = clock.now / 1000
        guard issuedAt.saturatingAdding(Self.apnsTokenLifetime) >= now, issuedAt <= now.saturatingAdding(60) else {
            return "apns-expired-provider-token"
        }
        let tooSoon = state.withLock { state -> Bool in
            guard let current = state.apnsTokenIssuedAt, issuedAt > current else {
                if state.apnsTokenIssuedAt == nil { state.apnsTokenIssuedAt = issuedAt }
                return false
            }
            if issuedAt.saturatingSubtracting(current) < Self.apnsTokenUpdateInterval { return true }
            state.apnsTokenIssuedAt = issuedAt
            return false
        }
        return tooSoon ? "apns-too-many-provider-token-updates" : nil
    }

    /// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in hex digits.
    static func isCanonicalUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x66) else { return false }
            }
        }
        return true
    }

    /// An answer with its `apns-id`, and no content type when it has no body (APNs's 200).
    static func apnsAnswer(_ response: Response, apnsID: String) -> Response {
        var response = response
        response.headers[apnsIDField] = apnsID
        if response.status.code == 200 { response.headers[.contentType] = nil }
        return response
    }
}
