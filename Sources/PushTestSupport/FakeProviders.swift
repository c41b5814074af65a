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
import PushJOSE
import Synchronization

/// Fake Google OAuth, FCM HTTP v1, HMS OAuth, HMS Push Kit and webhook receivers on one
/// loopback listener (HTTP, or HTTPS with HTTP/2 from the test CA of `fixtures/tls/`).
///
/// They check requests the way the real services do and answer with the recorded bodies of
/// `fixtures/providers/`:
/// - Google OAuth (`POST /token`): a JWT bearer grant whose assertion is signed (RS256) by the
///   registered service-account key, with its `iss`, the FCM `scope`, `aud` = this URL, and
///   `iat`/`exp` at most an hour apart and current.
/// - FCM (`POST /v1/projects/{project}/messages:send`): a bearer token this fake issued and has
///   not since refused; `message.token`; `data` an object of strings without reserved keys, at
///   most 4096 bytes as JSON; Android priority high; the APNs background settings.
/// - HMS OAuth (`POST /oauth2/v3/token`): client credentials, form-decoded, equal to the
///   registered ones.
/// - HMS (`POST /v1/{clientId}/messages:send`): a bearer token it issued; `data` a JSON string;
///   `token` an array of 1 to 1000 strings; urgency high; the body without tokens ≤ 4096 bytes.
///   Business errors come with HTTP 200, as Huawei's do.
/// - Webhooks (`POST /hooks/{name}`): a Standard Webhooks signature that verifies with the
///   registered secret and a timestamp within five minutes.
///
/// Device tokens script the answers: `unregistered-…` → 404 UNREGISTERED (FCM) / 80300007
/// (HMS), `illegal-…` → HMS partial success naming it; anything else → success, unless
/// ``script(_:_:)`` gave that target a sequence (503, 503, 200; 429 with `Retry-After`; a slow
/// answer …). Everything received is recorded.
public final class FakeProviders: Sendable {
    /// One request the fakes accepted (or refused).
    public struct Received: Sendable {
        /// `fcm`, `hms`, `webhook`, `google-oauth`, `hms-oauth`.
        public var provider: String
        /// The device token, or the webhook's name.
        public var target: String
        /// FCM: the `data` object; HMS: the `data` string; webhook: the body.
        public var data: [UInt8]
        /// The status answered.
        public var status: Int
        public var headers: [String: String]
        /// When it was answered: milliseconds since the epoch (the fake's clock).
        public var at: Int64
        /// When it arrived (before a scripted slow answer).
        public var arrivedAt: Int64
    }

    /// A scripted answer.
    public enum Step: Sendable {
        /// A recorded answer of `fixtures/providers/` (its status and `Retry-After`).
        case recorded(String)
        /// A status with a body and an optional `Retry-After`.
        case status(Int, body: String = "{}", retryAfter: String? = nil)
        /// The normal answer (success, or what the token's prefix asks for).
        case normal
        /// Waits, then answers `then`.
        indirect case slow(Duration, then: Step)
        /// No answer: the connection is closed (HTTP/1.1) or the stream reset (HTTP/2) after
        /// the request was read. Recorded with status 0.
        case reset
        /// HTTP/2: a GOAWAY whose last stream id is below this request's, then the stream
        /// refused (the server did not process it); HTTP/1.1: a reset. Recorded with status 0.
        case goAway
    }

    struct State {
        var scripts: [String: [Step]] = [:]
        var received: [Received] = []
        var googleTokens: Set<String> = []
        var hmsTokens: Set<String> = []
        var issued = 0
        /// What the token endpoints answer instead of a token (credential faults).
        var googleOAuthFault: Step?
        var hmsOAuthFault: Step?
        var tokenLifetime: Int64 = 3599
    }

    let state = Mutex(State())
    public let serviceAccount: ServiceAccountKey
    /// The service-account key file's JSON (its `token_uri` points here).
    public let serviceAccountJSON: [UInt8]
    public let hmsClientID = "1234567"
    public let hmsClientSecret = "s3cr/et+&="
    public let webhookSecrets: [String: String]
    public let baseURL: String
    let clock: any ServiceClock
    let task: Task<Void, any Error>

    /// The project id of the fake service account.
    public static let projectID = "fake-project"

    public var fcmEndpoint: String { baseURL }
    public var hmsEndpoint: String { baseURL }
    public var hmsTokenEndpoint: String { baseURL + "/oauth2/v3/token" }
    public func webhookURL(_ name: String) -> String { baseURL + "/hooks/" + name }

    /// Starts the fakes on a free loopback port.
    ///
    /// - Parameters:
    ///   - tls: HTTPS (HTTP/2 and HTTP/1.1 by ALPN) with `fixtures/tls/server.pem`.
    ///   - webhooks: webhook names and their `whsec_` secrets.
    ///   - clock: the clock requests are checked against (the service's, in tests).
    public static func start(
        tls: Bool = false, webhooks: [String: String] = [:], clock: any ServiceClock = SystemClock()
    ) async throws -> FakeProviders {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        // The port arrives once the server runs, which may be before or after the waiter.
        let port = Mutex<(port: Int?, waiter: CheckedContinuation<Int, any Error>?)>((nil, nil))
        let box = Box()
        let router = Router(context: BasicRequestContext.self)
        router.post("/token") { request, _ in try await box.fakes!.googleToken(request) }
        router.post("/oauth2/v3/token") { request, _ in try await box.fakes!.hmsToken(request) }
        router.post("/v1/projects/:project/messages:send") { request, context in
            try await box.fakes!.fcm(request, project: context.parameters.get("project") ?? "")
        }
        router.post("/v1/:client/messages:send") { request, context in
            try await box.fakes!.hms(request, client: context.parameters.get("client") ?? "")
        }
        router.post("/hooks/:name") { request, context in try await box.fakes!.webhook(request, name: context.parameters.get("name") ?? "") }
        var logger = Logger(label: "fake-providers")
        logger.logLevel = .critical
        let server: HTTPServerBuilder
        if tls {
            let folder = ProviderFixtures.root.appendingPathComponent("tls")
            let configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(folder.appendingPathComponent("server.pem").path).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: folder.appendingPathComponent("server-key.pem").path, format: .pem)))
            server = try .http2Upgrade(
                tlsConfiguration: configuration, configuration: .init(streamConfiguration: .init(additionalChannelHandlers: [ResetHandler(http2: true)])))
        } else {
            server = .http1(configuration: .init(additionalChannelHandlers: [ResetHandler(http2: false)]))
        }
        let application = Application(
            router: router, server: server, configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "fake-providers"),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? 0
                let waiter = port.withLock { state in
                    defer { state.waiter = nil }
                    state.port = bound
                    return state.waiter
                }
                waiter?.resume(returning: bound)
            }, logger: logger)
        let task = Task {
            do {
                try await application.runService(gracefulShutdownSignals: [])
            } catch {
                // A server that could not start must not leave its starter waiting.
                let waiter = port.withLock { state in
                    defer { state.waiter = nil }
                    state.port = state.port ?? -1
                    return state.waiter
                }
                waiter?.resume(throwing: error)
                throw error
            }
        }
        let bound = try await withCheckedThrowingContinuation { continuation in
            let ready = port.withLock { state -> Int? in
                if let bound = state.port { return bound }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
        guard bound > 0 else { throw CocoaError(.fileReadUnknown) }
        let base = (tls ? "https://localhost:" : "http://127.0.0.1:") + "\(bound)"
        let fakes = try FakeProviders(key: key, baseURL: base, webhooks: webhooks, clock: clock, task: task)
        box.fakes = fakes
        return fakes
    }

    init(key: _RSA.Signing.PrivateKey, baseURL: String, webhooks: [String: String], clock: any ServiceClock, task: Task<Void, any Error>)
        throws
    {
        let document: JSON = [
            "type": "service_account", "project_id": .string(Self.projectID), "private_key_id": "fake-key-1",
            "private_key": .string(key.pemRepresentation), "client_email": "pushdispatch@fake-project.iam.gserviceaccount.com",
            "client_id": "100000000000000000001", "token_uri": .string(baseURL + "/token"),
        ]
        var writer = JSONWriter()
        writer.write(document)
        serviceAccountJSON = writer.bytes
        serviceAccount = try ServiceAccountKey(json: serviceAccountJSON)
        self.baseURL = baseURL
        self.webhookSecrets = webhooks
        self.clock = clock
        self.task = task
    }

    /// Stops the listener.
    public func stop() async {
        task.cancel()
        _ = try? await task.value
    }

    // MARK: - Scripting and inspection

    /// The answers for a device token (or `webhook:<name>`), in order; after them, normal.
    public func script(_ target: String, _ steps: [Step]) {
        state.withLock { $0.scripts[target] = steps }
    }

    /// Every request received, in order.
    public var received: [Received] { state.withLock { $0.received } }

    public func received(provider: String) -> [Received] { received.filter { $0.provider == provider } }

    /// Refuses every access token issued so far (they "expire"): the next send gets the
    /// provider's "invalid token" answer.
    public func expireAccessTokens() {
        state.withLock { state in
            state.googleTokens.removeAll()
            state.hmsTokens.removeAll()
        }
    }

    /// What the Google (or HMS) token endpoint answers instead of a token; `nil` restores it.
    public func setOAuthFault(google: Step?, hms: Step?) {
        state.withLock { state in
            state.googleOAuthFault = google
            state.hmsOAuthFault = hms
        }
    }

    /// Tokens issued by both token endpoints.
    public var tokensIssued: Int { state.withLock { $0.issued } }

    // MARK: - Handlers

    func record(_ provider: String, _ target: String, _ data: [UInt8], _ status: Int, _ request: Request, arrived: Int64? = nil) {
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        let at = clock.now
        state.withLock {
            $0.received.append(Received(provider: provider, target: target, data: data, status: status, headers: headers, at: at, arrivedAt: arrived ?? at))
        }
    }

    func body(_ request: Request) async throws -> [UInt8] {
        Array(buffer: try await request.body.collect(upTo: 1 << 20))
    }

    func respond(_ status: Int, _ body: [UInt8], retryAfter: String? = nil) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=UTF-8"
        if let retryAfter { headers[.retryAfter] = retryAfter }
        return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    func respond(_ name: String) -> Response {
        let answer = ProviderFixtures.answer(name)
        return respond(answer.status, answer.body, retryAfter: answer.retryAfter)
    }

    func refuse(_ provider: String, _ target: String, _ request: Request, _ status: Int, _ message: String) -> Response {
        record(provider, target, [], status, request)
        var writer = JSONWriter()
        writer.write(["error": ["code": .int(Int64(status)), "message": .string(message), "status": "INVALID_ARGUMENT"]])
        return respond(status, writer.bytes)
    }

    /// The scripted answer for `target`, if one is left; `nil` for the normal answer.
    func next(_ target: String) async -> Response? {
        let step = state.withLock { state -> Step? in
            guard var steps = state.scripts[target], !steps.isEmpty else { return nil }
            let step = steps.removeFirst()
            state.scripts[target] = steps
            return step
        }
        guard let step else { return nil }
        return await render(step)
    }

    func render(_ step: Step) async -> Response? {
        switch step {
        case .normal: return nil
        case .recorded(let name): return respond(name)
        case .status(let status, let body, let retryAfter): return respond(status, Array(body.utf8), retryAfter: retryAfter)
        case .slow(let duration, let then):
            try? await Task.sleep(for: duration)
            return await render(then)
        case .reset, .goAway:
            var headers = HTTPFields()
            headers[ResetHandler.marker] = step.isGoAway ? "goaway" : "reset"
            return Response(status: .init(code: 599), headers: headers)
        }
    }

    /// The status a scripted answer is recorded with: 0 for a reset.
    static func status(of response: Response) -> Int {
        response.headers[ResetHandler.marker] == nil ? response.status.code : 0
    }

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
            record("fcm", target, dataBytes, Self.status(of: scripted), request, arrived: arrived)
            return scripted
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
            record("hms", target, Array(data.utf8), Self.status(of: scripted), request, arrived: arrived)
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
        let bytes = try await body(request)
        guard let secret = webhookSecrets[name], let verifier = try? WebhookVerifier(secret) else {
            record("webhook", name, bytes, 404, request)
            return respond(404, [])
        }
        guard let id = request.headers[HTTPField.Name("webhook-id")!], let timestamp = request.headers[HTTPField.Name("webhook-timestamp")!],
            let signature = request.headers[HTTPField.Name("webhook-signature")!], let seconds = Int64(timestamp),
            abs(seconds - clock.now / 1000) <= 300, verifier.verify(id: id, timestamp: seconds, body: bytes, header: signature)
        else {
            record("webhook", name, bytes, 401, request)
            return respond(401, [])
        }
        if let scripted = await next("webhook:" + name) {
            record("webhook", name, bytes, Self.status(of: scripted), request, arrived: arrived)
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

/// Verifies Standard Webhooks signatures as a receiver does.
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

extension FakeProviders.Step {
    var isGoAway: Bool {
        if case .goAway = self { return true }
        return false
    }
}

/// Turns a response marked `x-fake-reset` into no answer at all: the connection is closed
/// (HTTP/1.1) or the stream reset (HTTP/2), as a provider's load balancer may do.
final class ResetHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart
    static let marker = HTTPField.Name("x-fake-reset")!
    /// Whether this handler sits on an HTTP/2 stream (whose parent is the connection).
    let http2: Bool
    var dropping = false

    init(http2: Bool) {
        self.http2 = http2
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .head(let head) = unwrapOutboundIn(data), let mark = head.headerFields[Self.marker] {
            dropping = true
            if mark == "goaway", http2, let connection = context.channel.parent,
                let stream = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)
            {
                let last = HTTP2StreamID(max(0, Int(stream) - 2))
                connection.writeAndFlush(HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: last, errorCode: .noError, opaqueData: nil)))
                    .whenComplete { _ in }
            }
            context.close(mode: .all, promise: nil)
        }
        guard !dropping else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(data, promise: promise)
    }
}
