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
/// - Push Kit v3 for HarmonyOS (`POST /v3/{projectId}/messages:send`): a PS256 service-account
///   JWT, `push-type: 6`, `extraData` (`FakeProviders+Harmony.swift`).
/// - Webhooks (`POST /hooks/{name}`): a Standard Webhooks signature that verifies with the
///   registered secret and a timestamp within five minutes.
/// - APNs (`POST /3/device/{token}`, HTTP/2 when started with `tls`): the team's provider JWT,
///   the background-push headers and payload (`FakeProviders+APNs.swift`).
/// - Web Push (`POST /push/{name}`): RFC 8030 headers, the VAPID header (RFC 8292), the body
///   decrypted with the subscriber's keys (RFC 8291) (`FakeProviders+WebPush.swift`).
///
/// Device tokens script the answers: `unregistered-…` → 404 UNREGISTERED (FCM) / 80300007
/// (HMS), `illegal-…` → HMS partial success naming it; anything else → success, unless
/// ``script(_:_:)`` gave that target a sequence (503, 503, 200; 429 with `Retry-After`; a slow
/// answer …). Everything received is recorded.
public final class FakeProviders: Sendable {
    /// One request the fakes accepted (or refused).
    public struct Received: Sendable {
        /// `fcm`, `hms`, `webhook`, `google-oauth`, `hms-oauth`, `apns`, `webpush`.
        public var provider: String
        /// The device token (APNs: the hex token of the path), the webhook's name, or the Web
        /// Push subscription's name.
        public var target: String
        /// FCM: the `data` object; HMS: the `data` string; webhook and APNs: the body as sent;
        /// Web Push: the decrypted plaintext (empty when the body did not decrypt).
        public var data: [UInt8]
        /// The status answered.
        public var status: Int
        public var headers: [String: String]
        /// When it was answered: milliseconds since the epoch (the fake's clock).
        public var at: Int64
        /// When it arrived (before a scripted slow answer).
        public var arrivedAt: Int64
        /// When its handler began (the request on the wire) and when it was answered:
        /// microseconds since the epoch by the system clock, for latency benchmarks.
        public var arrivedMicros: Int64 = 0
        public var answeredMicros: Int64 = 0
        /// Web Push: the body as received (encrypted); empty for the other providers.
        public var raw: [UInt8] = []
    }

    /// Microseconds since the epoch, by the system clock.
    public static func wallMicros() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000 + Int64(time.tv_nsec) / 1_000
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
        /// Answers that stay until changed (a provider that flaps, for a soak).
        var standing: [String: Step] = [:]
        var received: [Received] = []
        /// Whether `received` keeps every request (a soak of millions counts them only).
        var keepsReceived = true
        /// Requests answered, by provider and status.
        var answered: [String: Int] = [:]
        var googleTokens: Set<String> = []
        var hmsTokens: Set<String> = []
        /// Push Kit v3 JWTs seen, and those to refuse as expired.
        var seenHarmonyJWTs: Set<String> = []
        var expiredHarmonyJWTs: Set<String> = []
        var issued = 0
        /// What the token endpoints answer instead of a token (credential faults).
        var googleOAuthFault: Step?
        var hmsOAuthFault: Step?
        var tokenLifetime: Int64 = 3599
        /// APNs: the `iat` of the team's current provider token (the newest accepted).
        var apnsTokenIssuedAt: Int64?
        /// Web Push: the subscriptions by name.
        var webPushSubscribers: [String: WebPushSubscriber] = [:]
        /// Web Push: the VAPID public key (`k`, decoded) subscriptions were made under.
        var webPushVAPIDKey: [UInt8]?
        /// Web Push: messages created (the `Location` of the next is `/message/<n + 1>`).
        var webPushMessages = 0
        /// How far (seconds) a webhook's `webhook-timestamp` may be from the fake's clock.
        var webhookTolerance: Int64 = 300
        /// FCM's quota: messages accepted per second (`nil`: none), and when the ones of the
        /// past second were accepted.
        var fcmQuota: Int?
        var fcmAccepted: [Int64] = []
    }

    let state = Mutex(State())
    public let serviceAccount: ServiceAccountKey
    /// The service-account key file's JSON (its `token_uri` points here).
    public let serviceAccountJSON: [UInt8]
    public let hmsClientID = "1234567"
    public let hmsClientSecret = "s3cr/et+&="
    public let webhookSecrets: [String: String]
    public let baseURL: String
    /// The Push Kit service account's key, as PEM, and its public half.
    let harmonyKeyPEM: String
    let harmonyPublicKey: _RSA.Signing.PublicKey
    /// The APNs team's signing key (its `.p8`), made at start.
    let apnsKey: P256.Signing.PrivateKey
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
        router.post("/v3/:project/messages:send") { request, context in
            try await box.fakes!.harmony(request, project: context.parameters.get("project") ?? "")
        }
        router.post("/hooks/:name") { request, context in try await box.fakes!.webhook(request, name: context.parameters.get("name") ?? "") }
        router.post("/3/device/:token") { request, context in try await box.fakes!.apns(request, token: context.parameters.get("token") ?? "") }
        router.post("/push/:name") { request, context in try await box.fakes!.webPush(request, name: context.parameters.get("name") ?? "") }
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
        harmonyKeyPEM = key.pemRepresentation
        harmonyPublicKey = key.publicKey
        self.baseURL = baseURL
        self.apnsKey = P256.Signing.PrivateKey()
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

    /// The answers for a device token (APNs: the hex token; or `webhook:<name>`, or a Web Push
    /// subscription's name), in order; after them, normal.
    public func script(_ target: String, _ steps: [Step]) {
        state.withLock { $0.scripts[target] = steps }
    }

    /// The answer for `target` from now on, for every request, until set again (`nil`: the
    /// script, then normal). A flapping provider, for a soak.
    public func setStanding(_ target: String, _ step: Step?) {
        state.withLock { $0.standing[target] = step }
    }

    /// A quota on FCM (issue 34): every message beyond `perSecond` accepted in the past second
    /// (by the fake's clock) is answered 429 `RESOURCE_EXHAUSTED` (`QUOTA_EXCEEDED`) with
    /// `Retry-After: 1`. As FCM's own quota, a refused message does not count against it.
    /// `nil` lifts it.
    public func setQuota(fcm perSecond: Int?) {
        state.withLock { state in
            state.fcmQuota = perSecond
            state.fcmAccepted.removeAll()
        }
    }

    /// Whether an FCM message at `now` is within the quota (it is counted when it is).
    func withinFCMQuota(at now: Int64) -> Bool {
        state.withLock { state in
            guard let quota = state.fcmQuota else { return true }
            if let expired = state.fcmAccepted.firstIndex(where: { $0 > now - 1_000 }) {
                state.fcmAccepted.removeFirst(expired)
            } else {
                state.fcmAccepted.removeAll()
            }
            guard state.fcmAccepted.count < quota else { return false }
            state.fcmAccepted.append(now)
            return true
        }
    }

    /// Whether every request is kept in ``received`` (default true); either way they are
    /// counted in ``answered``.
    public func keepReceived(_ keep: Bool) {
        state.withLock { $0.keepsReceived = keep }
    }

    /// Requests answered so far, by `provider/status`.
    public var answered: [String: Int] { state.withLock { $0.answered } }

    /// Accepts webhooks whose `webhook-timestamp` is within `seconds` of the fake's clock
    /// (default 300, as Standard Webhooks receivers do): a test of senders whose clocks are off.
    public func acceptWebhookTimestamps(within seconds: Int64) {
        state.withLock { $0.webhookTolerance = seconds }
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

    func record(
        _ provider: String, _ target: String, _ data: [UInt8], _ status: Int, _ request: Request, arrived: Int64? = nil, arrivedMicros: Int64? = nil,
        raw: [UInt8] = []
    ) {
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        let at = clock.now
        let answered = Self.wallMicros()
        state.withLock {
            $0.answered["\(provider)/\(status)", default: 0] += 1
            guard $0.keepsReceived else { return }
            $0.received.append(
                Received(
                    provider: provider, target: target, data: data, status: status, headers: headers, at: at, arrivedAt: arrived ?? at,
                    arrivedMicros: arrivedMicros ?? answered, answeredMicros: answered, raw: raw))
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
            if let standing = state.standing[target] { return standing }
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

}

/// Verifies Standard Webhooks signatures as a receiver does.
