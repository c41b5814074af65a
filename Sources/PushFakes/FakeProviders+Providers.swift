import Crypto
import CryptoExtras
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOHTTP2
import NIOHTTPTypes
import NIOSSL
import PushCore
import PushJSON
import PushJOSE
import Synchronization

/// The providers the fakes play: Google OAuth, FCM, HMS OAuth, HMS and the webhook receivers,
/// each checking requests as the real service does.
extension FakeProviders {
    func issueToken(google: Bool) -> [UInt8] {
        let (token, lifetime) = state.withLock { state -> (String, Int64) in
            state.issued += 1
            let token = (google ? "ya29.fake-" : "CF1fake-") + "\(state.issued)"
            if google { state.googleTokens.insert(token) } else { state.hmsTokens.insert(token) }
            return (token, state.tokenLifetime)
        }
        var writer = JSONWriter()
        writer.write(["access_token": .string(token), "expires_in": .int(lifetime), "token_type": "Bearer"])
        return writer.bytes
    }

    func googleToken(_ request: Request) async throws -> Response {
        let form = Self.form(try await body(request))
        if let fault = state.withLock({ $0.googleOAuthFault }), let response = await render(fault) {
            record("google-oauth", "", [], Self.status(of: response), request)
            return response
        }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = form["assertion"] else {
            record("google-oauth", "", [], 400, request)
            return respond(400, Array(#"{"error":"unsupported_grant_type","error_description":"Invalid grant_type"}"#.utf8))
        }
        if let problem = checkAssertion(assertion) {
            record("google-oauth", "", [], 400, request)
            var writer = JSONWriter()
            writer.write(["error": "invalid_grant", "error_description": .string(problem)])
            return respond(400, writer.bytes)
        }
        record("google-oauth", "", [], 200, request)
        return respond(200, issueToken(google: true))
    }

    /// Why an assertion would be refused by Google, or `nil`.
    func checkAssertion(_ assertion: String) -> String? {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]), let header = try? JSONParser.parse(headerBytes),
            let claims = try? JSONParser.parse(claimBytes)
        else { return "Invalid JWT: not a JWS" }
        guard header["alg"]?.stringValue == "RS256", header["kid"]?.stringValue == "fake-key-1" else { return "Invalid JWT header" }
        let valid = serviceAccount.privateKey.publicKey.isValidSignature(
            _RSA.Signing.RSASignature(rawRepresentation: signature), for: Array((parts[0] + "." + parts[1]).utf8), padding: .insecurePKCS1v1_5)
        guard valid else { return "Invalid JWT Signature." }
        guard claims["iss"]?.stringValue == serviceAccount.clientEmail else { return "Invalid issuer" }
        guard let scope = claims["scope"]?.stringValue, scope.split(separator: " ").contains("https://www.googleapis.com/auth/firebase.messaging")
        else { return "Invalid scope" }
        guard claims["aud"]?.stringValue == serviceAccount.tokenURI else { return "Invalid audience" }
        let seconds = clock.now / 1000
        guard let iat = claims["iat"]?.integerValue, let exp = claims["exp"]?.integerValue, exp > iat, exp - iat <= 3600, iat <= seconds + 60,
            exp >= seconds - 60
        else {
            return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values and use a clock with skew to account for clock differences between systems."
        }
        return nil
    }

    func hmsToken(_ request: Request) async throws -> Response {
        let form = Self.form(try await body(request))
        if let fault = state.withLock({ $0.hmsOAuthFault }), let response = await render(fault) {
            record("hms-oauth", "", [], Self.status(of: response), request)
            return response
        }
        guard form["grant_type"] == "client_credentials", form["client_id"] == hmsClientID, form["client_secret"] == hmsClientSecret else {
            record("hms-oauth", "", [], 400, request)
            return respond("hms-token-invalid-client")
        }
        record("hms-oauth", "", [], 200, request)
        return respond(200, issueToken(google: false))
    }

    func bearer(_ request: Request) -> String? {
        guard let value = request.headers[.authorization], value.hasPrefix("Bearer ") else { return nil }
        return String(value.dropFirst(7))
    }

    static let reservedPrefixes = ["google", "gcm"]
    static let reservedKeys: Set<String> = ["from", "message_type", "notification"]

    func fcm(_ request: Request, project: String) async throws -> Response {
        let arrived = clock.now
        let arrivedMicros = Self.wallMicros()
        let bytes = try await body(request)
        guard project == Self.projectID else {
            record("fcm", "", [], 404, request)
            return respond(404, Array(#"{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND"}}"#.utf8))
        }
        guard let token = bearer(request), state.withLock({ $0.googleTokens.contains(token) }) else {
            record("fcm", "", [], 401, request)
            return respond("fcm-unauthenticated")
        }
        guard let json = try? JSONParser.parse(bytes), let message = json["message"], let target = message["token"]?.stringValue else {
            return refuse("fcm", "", request, 400, "Invalid JSON payload received.")
        }
        guard case .object(let data)? = message["data"] else { return refuse("fcm", target, request, 400, "message.data is not a map") }
        for (index, member) in data.enumerated() {
            let key = member.key.string
            guard case .string = member.value else {
                return refuse("fcm", target, request, 400, "Invalid value at 'message.data[\(index)].value' (TYPE_STRING)")
            }
            if Self.reservedKeys.contains(key) || Self.reservedPrefixes.contains(where: { key.hasPrefix($0) }) {
                return refuse("fcm", target, request, 400, "Invalid data payload key: \(key)")
            }
        }
        var writer = JSONWriter()
        writer.write(.object(data))
        let dataBytes = writer.bytes
        guard dataBytes.count <= 4096 else { return refuse("fcm", target, request, 400, "Request contains an invalid argument.") }
        guard message["android"]?["priority"]?.stringValue == "HIGH" else { return refuse("fcm", target, request, 400, "android.priority is not HIGH") }
        let apns = message["apns"]
        guard apns?["headers"]?["apns-push-type"]?.stringValue == "background", apns?["headers"]?["apns-priority"]?.stringValue == "5",
            apns?["payload"]?["aps"]?["content-available"]?.integerValue == 1, apns?["payload"]?["aps"]?["alert"] == nil
        else { return refuse("fcm", target, request, 400, "a data-only message to Apple devices must be a background push with priority 5") }
        if let scripted = await next(target) {
            record("fcm", target, dataBytes, Self.status(of: scripted), request, arrived: arrived, arrivedMicros: arrivedMicros)
            return scripted
        }
        guard withinFCMQuota(at: clock.now) else {
            record("fcm", target, dataBytes, 429, request, arrived: arrived, arrivedMicros: arrivedMicros)
            return respond(429, ProviderFixtures.answer("fcm-quota-exceeded").body, retryAfter: "1")
        }
        if target.hasPrefix("unregistered-") {
            record("fcm", target, dataBytes, 404, request)
            return respond("fcm-unregistered")
        }
        record("fcm", target, dataBytes, 200, request)
        return respond(200, Array(#"{"name":"projects/\#(Self.projectID)/messages/0:\#(clock.now)%fake"}"#.utf8))
    }

    func hms(_ request: Request, client: String) async throws -> Response {
        let arrived = clock.now
        let arrivedMicros = Self.wallMicros()
        let bytes = try await body(request)
        guard client == hmsClientID else {
            record("hms", "", [], 404, request)
            return respond(404, Array(#"{"code":"80300002","msg":"unknown app"}"#.utf8))
        }
        guard let token = bearer(request), state.withLock({ $0.hmsTokens.contains(token) }) else {
            record("hms", "", [], 200, request)
            return respond("hms-token-expired")
        }
        func invalid(_ message: String) -> Response {
            record("hms", "", [], 400, request)
            return respond(400, Array(#"{"code":"80100003","msg":"Illegal payload, \#(message)"}"#.utf8))
        }
        guard let json = try? JSONParser.parse(bytes), let message = json["message"] else { return invalid("not JSON") }
        guard let data = message["data"]?.stringValue, (try? JSONParser.parse(data)) != nil else { return invalid("data must be a JSON string") }
        guard let tokens = message["token"]?.arrayValue?.compactMap(\.stringValue), (1...1000).contains(tokens.count) else {
            return invalid("token must be an array of 1 to 1000 strings")
        }
        guard message["android"]?["urgency"]?.stringValue == "HIGH" else { return invalid("android.urgency is not HIGH") }
        let tokenBytes = tokens.reduce(0) { $0 + $1.utf8.count + 3 }
        guard bytes.count - tokenBytes <= 4096 else {
            record("hms", tokens[0], [], 200, request)
            return respond(200, Array(#"{"code":"80300008","msg":"The message body size exceeds the default value"}"#.utf8))
        }
        let target = tokens[0]
        if let scripted = await next(target) {
            record("hms", target, Array(data.utf8), Self.status(of: scripted), request, arrived: arrived, arrivedMicros: arrivedMicros)
            return scripted
        }
        if target.hasPrefix("unregistered-") {
            record("hms", target, Array(data.utf8), 200, request)
            return respond("hms-all-tokens-invalid")
        }
        if target.hasPrefix("illegal-") {
            record("hms", target, Array(data.utf8), 200, request)
            var detail = JSONWriter()
            detail.write(["success": 0, "failure": 1, "illegal_tokens": [.string(target)]])
            var writer = JSONWriter()
            writer.write(["code": "80100000", "msg": .string(detail.string), "requestId": "fake"])
            return respond(200, writer.bytes)
        }
        record("hms", target, Array(data.utf8), 200, request)
        return respond("hms-success")
    }

    func webhook(_ request: Request, name: String) async throws -> Response {
        let arrived = clock.now
        let arrivedMicros = Self.wallMicros()
        let bytes = try await body(request)
        guard let secret = webhookSecrets[name], let verifier = try? WebhookVerifier(secret) else {
            record("webhook", name, bytes, 404, request)
            return respond(404, [])
        }
        guard let id = request.headers[HTTPField.Name("webhook-id")!], let timestamp = request.headers[HTTPField.Name("webhook-timestamp")!],
            let signature = request.headers[HTTPField.Name("webhook-signature")!], let seconds = Int64(timestamp),
            abs(seconds - clock.now / 1000) <= state.withLock({ $0.webhookTolerance }), verifier.verify(id: id, timestamp: seconds, body: bytes, header: signature)
        else {
            record("webhook", name, bytes, 401, request)
            return respond(401, [])
        }
        if let scripted = await next("webhook:" + name) {
            record("webhook", name, bytes, Self.status(of: scripted), request, arrived: arrived, arrivedMicros: arrivedMicros)
            return scripted
        }
        record("webhook", name, bytes, 200, request)
        return respond(200, [])
    }

    /// `application/x-www-form-urlencoded` decoded.
    static func form(_ bytes: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in bytes.split(separator: UInt8(ascii: "&")) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: ArraySlice<UInt8>) -> String {
                var out: [UInt8] = []
                var index = part.startIndex
                while index < part.endIndex {
                    let byte = part[index]
                    if byte == UInt8(ascii: "+") {
                        out.append(UInt8(ascii: " "))
                    } else if byte == UInt8(ascii: "%"), index + 2 < part.endIndex, let value = UInt8(String(decoding: part[(index + 1)...(index + 2)], as: UTF8.self), radix: 16) {
                        out.append(value)
                        index += 2
                    } else {
                        out.append(byte)
                    }
                    index += 1
                }
                return String(decoding: out, as: UTF8.self)
            }
            fields[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

    final class Box: @unchecked Sendable {
        var fakes: FakeProviders?
    }
}
