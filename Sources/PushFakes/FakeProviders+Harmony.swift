import Crypto
import CryptoExtras
import Foundation
import HTTPTypes
import Hummingbird
import PushCore
import PushJOSE
import PushJSON

/// Push Kit v3 for HarmonyOS (`POST /v3/{projectId}/messages:send`), checked as Huawei's
/// documentation describes it (`docs/providers-2026.md`) and answered with the recorded bodies
/// of `fixtures/providers/harmony-*`:
/// - `Authorization: Bearer <JWT>`: PS256 with the service account's key, `kid` its `key_id`,
///   `iss` its `sub_account`, `aud` its `token_uri`, `exp` after now and at most a day after
///   `iat` (80300036 beyond); a JWT ``expireHarmonyJWTs()`` named is refused 80200005;
/// - `push-type: 6` (a background message);
/// - `payload.extraData` a string, `target.token` 1 to 1,000 strings, the body without its
///   tokens at most 4,096 bytes (80300008).
/// Device tokens script the answers as for the other providers: `unregistered-…` → 80300007
/// naming it `tokenFormatError`; ``script(_:_:)`` for the rest.
extension FakeProviders {
    /// The Push Kit project of the fake service account.
    public static let harmonyProjectID = "101234567"
    public var harmonyEndpoint: String { baseURL }

    /// The AppGallery Connect service-account key file's JSON (the same RSA key as Google's).
    public var harmonyAccountJSON: [UInt8] {
        var writer = JSONWriter()
        writer.write([
            "project_id": .string(Self.harmonyProjectID), "key_id": "fake-harmony-key", "sub_account": "1234567890",
            "private_key": .string(harmonyKeyPEM), "token_uri": .string(HarmonyServiceAccount.defaultAudience),
            "auth_uri": "https://oauth-login.cloud.huawei.com/oauth2/v3/authorize",
        ])
        return writer.bytes
    }

    /// From now on, every JWT this fake has seen is refused as expired (80200005): the sender
    /// must sign a new one.
    public func expireHarmonyJWTs() {
        state.withLock { $0.expiredHarmonyJWTs.formUnion($0.seenHarmonyJWTs) }
    }

    /// Why the JWT is refused (a fixture's name), or `nil`.
    func harmonyJWTProblem(_ jwt: String) -> String? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]), let header = try? JSONParser.parse(headerBytes), let claims = try? JSONParser.parse(claimBytes)
        else { return "harmony-auth-error" }
        guard header["alg"]?.stringValue == "PS256", header["kid"]?.stringValue == "fake-harmony-key", header["typ"]?.stringValue == "JWT" else {
            return "harmony-auth-error"
        }
        let input = Array((parts[0] + "." + parts[1]).utf8)
        guard harmonyPublicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: SHA256.hash(data: input), padding: .PSS)
        else { return "harmony-auth-error" }
        guard claims["iss"]?.stringValue == "1234567890", claims["aud"]?.stringValue == HarmonyServiceAccount.defaultAudience else {
            return "harmony-auth-error"
        }
        let seconds = clock.now / 1_000
        guard let iat = claims["iat"]?.integerValue, let exp = claims["exp"]?.integerValue, exp > iat, iat <= seconds + 60 else {
            return "harmony-auth-error"
        }
        if exp - iat > 86_400 { return "harmony-jwt-too-long" }
        if exp < seconds - 60 || state.withLock({ $0.expiredHarmonyJWTs.contains(jwt) }) { return "harmony-jwt-expired" }
        return nil
    }

    func harmony(_ request: Request, project: String) async throws -> Response {
        let arrived = clock.now
        let arrivedMicros = Self.wallMicros()
        let bytes = try await body(request)
        func answer(_ name: String, _ target: String = "") -> Response {
            let response = respond(name)
            record("harmonyos", target, [], Self.status(of: response), request)
            return response
        }
        guard project == Self.harmonyProjectID else { return answer("harmony-not-allowed") }
        guard let jwt = bearer(request) else { return answer("harmony-auth-error") }
        if let problem = harmonyJWTProblem(jwt) { return answer(problem) }
        state.withLock { _ = $0.seenHarmonyJWTs.insert(jwt) }
        func invalid(_ code: String, _ message: String) -> Response {
            record("harmonyos", "", [], 400, request)
            var writer = JSONWriter()
            writer.write(["code": .string(code), "msg": .string(message), "requestId": "fake"])
            return respond(400, writer.bytes)
        }
        guard request.headers[HTTPField.Name("push-type")!] == "6" else { return invalid("80100001", "Check Parameter Error. push-type must be 6 here") }
        guard let json = try? JSONParser.parse(bytes) else { return invalid("80100001", "Check Parameter Error.") }
        guard let data = json["payload"]?["extraData"]?.stringValue, !data.isEmpty else { return invalid("80100003", "Illegal payload, extraData is empty.") }
        guard let tokens = json["target"]?["token"]?.arrayValue?.compactMap(\.stringValue), !tokens.isEmpty else {
            return invalid("80100001", "Check Parameter Error. target.token")
        }
        guard tokens.count <= 1_000 else { return invalid("80300010", "token count should within 1 and 1000.") }
        let tokenBytes = tokens.reduce(0) { $0 + $1.utf8.count + 3 }
        let target = tokens[0]
        guard bytes.count - tokenBytes <= 4_096 else { return answer("harmony-too-large", target) }
        if let scripted = await next(target) {
            record("harmonyos", target, Array(data.utf8), Self.status(of: scripted), request, arrived: arrived, arrivedMicros: arrivedMicros)
            return scripted
        }
        if target.hasPrefix("unregistered-") {
            record("harmonyos", target, Array(data.utf8), 400, request)
            var detail = JSONWriter()
            detail.write(["illegalTokens": ["tokenFormatError": [.string(target)]], "failure": 1])
            var writer = JSONWriter()
            writer.write(["code": "80300007", "msg": .string(detail.string), "requestId": "fake"])
            return respond(400, writer.bytes)
        }
        record("harmonyos", target, Array(data.utf8), 200, request, arrived: arrived, arrivedMicros: arrivedMicros)
        return respond("harmony-success")
    }
}
