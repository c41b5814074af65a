import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import PushAPI
import PushContracts
import PushCore
import PushJOSE
import PushJSON
import PushMatching
import PushStore
import PushTestSupport
import Synchronization

/// The REST API's router in process (HummingbirdTesting), over a real SQLite store in a
/// temporary folder and a manual clock: no service, no socket.
struct APIHarness {
    static let secret = "toto-secret-of-at-least-thirty-two-bytes"
    static let collection = "/datasync/v2/toto/subscriptions/u1"
    static let document = #"{"kind":"mobile","mode":"value","path":"/users/u1/inbox","context":"fcm-token-1"}"#

    let store: SQLiteStore
    let clock = ManualClock(start: 1_800_000_000_000)
    let index = CountingIndex()
    let readiness = SettableReadiness()
    let api: SubscriptionAPI
    let router: Router<BasicRequestContext>

    /// - Parameters:
    ///   - rules: toto's read rules (default: any authenticated client reads everything).
    ///   - tree: toto's data, for rules that read it.
    init(rules: ReadRules = .authenticated, tree: DataTree = DataTree()) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-api-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        store = try SQLiteStore(path: folder.appendingPathComponent("store.db").path)
        let documentRules = SubscriptionRules(
            webhooks: ["orders"], lifetimes: SubscriptionLifetimes(defaultLifetime: 7 * 86_400, maxLifetime: 30 * 86_400),
            checkEncryption: { _ throws(RequestError) in })
        let access = RulesAccess(app: "toto", rules: rules, trees: FixedTree(tree: tree), clock: clock)
        let toto = APIApplication(id: "toto", verifier: try BearerTokenVerifier.hs256(secret: Self.secret), rules: documentRules, access: access)
        let closed = APIApplication(id: "closed", verifier: nil, rules: documentRules, access: access)
        var logger = Logger(label: "api-test")
        logger.logLevel = .critical
        api = SubscriptionAPI(
            store: store, applications: ["toto": toto, "closed": closed], clock: clock, index: index, jwks: ["keys": []], readiness: readiness,
            logger: logger)
        let served = ServedPaths()
        router = api.router(served: served)
        served.record(router)
    }

    /// A bearer token for `subject`, signed with `secret`, valid around the clock, with `extra` claims.
    func token(_ subject: String = "u1", secret: String = APIHarness.secret, extra: [(String, JSON)] = []) throws -> String {
        let now = clock.nowSeconds
        let claims = JSON.object(JSONObject([(Key("sub"), .string(subject)), ("iat", .int(now)), ("exp", .int(now + 600))] + extra.map { (Key($0.0), $0.1) }))
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        return String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(Array(claims.description.utf8)), as: UTF8.self)
    }

    struct Reply: Sendable {
        var status: Int
        var headers: HTTPFields
        var body: String
        var json: JSON? { try? JSONParser.parse(Array(body.utf8)) }
        /// The `error` field of a JSON error.
        var code: String? { json?["error"]?.stringValue }
    }

    /// Runs `body` with a client of the router.
    func run(_ body: @escaping @Sendable (Client) async throws -> Void) async throws {
        let application = Application(router: router)
        try await application.test(.router) { client in
            try await body(Client(client: client))
        }
    }

    struct Client: Sendable {
        let client: any TestClientProtocol

        func send(
            _ method: HTTPRequest.Method, _ uri: String, body: String? = nil, token: String? = nil, contentType: String? = "application/json",
            headers extra: HTTPFields = [:]
        ) async throws -> Reply {
            var headers = extra
            if let token { headers[.authorization] = "Bearer \(token)" }
            if body != nil, let contentType { headers[.contentType] = contentType }
            return try await client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }) { response in
                Reply(status: Int(response.status.code), headers: response.headers, body: String(buffer: response.body))
            }
        }
    }
}

/// Counts the catch-ups the API asks of the index (read-your-writes).
final class CountingIndex: SubscriptionIndexFollower, Sendable {
    let caughtUp = Atomic<Int>(0)
    func nudge() {}
    func catchUp() async { caughtUp.add(1, ordering: .relaxed) }
    var count: Int { caughtUp.load(ordering: .relaxed) }
}

/// A readiness the test sets.
final class SettableReadiness: ReadinessProbe, Sendable {
    let current = Mutex<JSON?>(nil)
    func problem() async -> JSON? { current.withLock { $0 } }
}

/// One application's data, as the engine would publish it.
struct FixedTree: TreeSource {
    let tree: DataTree
    func tree(app: String) async throws -> DataTree { tree }
}
