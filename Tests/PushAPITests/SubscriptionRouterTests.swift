import HTTPTypes
import PushAPI
import PushCore
import PushJSON
import PushMatching
import PushTestSupport
import Testing

/// The REST API of SPEC §5 driven in process: the router alone, a real SQLite store.
@Suite("The subscription API, in process")
struct SubscriptionRouterTests {
    static let collection = APIHarness.collection
    static let document = APIHarness.document

    @Test("create, conflict, refresh, read, list, PUT and removal answer the documented codes; each change reaches the index first")
    func flow() async throws {
        let api = try APIHarness()
        let token = try api.token()
        let index = api.index
        try await api.run { client in
            let created = try await client.send(.post, Self.collection, body: Self.document, token: token)
            #expect(created.status == 201)
            let id = try #require(created.json?["id"]?.stringValue)
            #expect(created.headers[.contentLocation] == "\(Self.collection)/\(id)")
            #expect(created.json?["createdAt"] == .int(1_800_000_000))
            #expect(created.json?["expirationTimestampSeconds"] == .int(1_800_000_000 + 7 * 86_400))
            #expect(index.count == 1)

            let again = try await client.send(.post, Self.collection, body: Self.document, token: token)
            #expect(again.status == 409 && again.code == "conflict")
            #expect(index.count == 1)

            let refreshed = try await client.send(.post, Self.collection + "?allowsUpdate=true", body: Self.document, token: token)
            #expect(refreshed.status == 200 && refreshed.json?["id"]?.stringValue == id)
            #expect(index.count == 2)

            #expect(try await client.send(.get, Self.collection, token: token).json?.arrayValue?.count == 1)
            #expect(try await client.send(.get, "\(Self.collection)/\(id)", token: token).json?["id"]?.stringValue == id)

            let put = try await client.send(.put, "\(Self.collection)/\(id)", body: #"{"expirationTimestampSeconds":1800000100}"#, token: token)
            #expect(put.status == 200 && put.json?["expirationTimestampSeconds"] == .int(1_800_000_100))
            let capped = try await client.send(.put, "\(Self.collection)/\(id)", body: #"{"expirationTimestampSeconds":4000000000}"#, token: token)
            #expect(capped.json?["expirationTimestampSeconds"] == .int(1_800_000_000 + 30 * 86_400))

            #expect(try await client.send(.delete, "\(Self.collection)/\(id)", token: token).status == 204)
            #expect(index.count == 3)
            let gone = try await client.send(.delete, "\(Self.collection)/\(id)", token: token)
            #expect(gone.status == 404 && gone.code == "not_found")
            #expect(try await client.send(.get, Self.collection, token: token).body == "[]")

            // expirationTimestampSeconds 0 removes; with nothing to remove, the index is not asked.
            let removal = #"{"kind":"mobile","mode":"value","path":"/users/u1/inbox","context":"fcm-token-1","expirationTimestampSeconds":0}"#
            #expect(try await client.send(.post, Self.collection, body: removal, token: token).status == 204)
            #expect(index.count == 3)
        }
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        var name: String
        var method: HTTPRequest.Method = .post
        var path: String = APIHarness.collection
        var body: String? = APIHarness.document
        /// `nil`: no Authorization header; else a token for this subject and secret.
        var token: (subject: String, secret: String)? = ("u1", APIHarness.secret)
        var contentType = "application/json"
        var status: Int
        var code: String
        var testDescription: String { name }
    }

    static let refusalRows: [Refusal] = [
        Refusal(name: "no token", token: nil, status: 401, code: "unauthorized"),
        Refusal(name: "a token signed with another key", token: ("u1", "another-secret-of-at-least-thirty-two-bytes"), status: 401, code: "unauthorized"),
        Refusal(name: "a valid token for another user", token: ("u2", APIHarness.secret), status: 403, code: "forbidden"),
        Refusal(name: "an application without authentication", path: "/datasync/v2/closed/subscriptions/u1", status: 401, code: "unauthorized"),
        Refusal(name: "an unknown application", path: "/datasync/v2/nope/subscriptions/u1", status: 404, code: "not_found"),
        // Which applications exist is not told without credentials: as a known application would answer.
        Refusal(name: "an unknown application, no token", path: "/datasync/v2/nope/subscriptions/u1", token: nil, status: 401, code: "unauthorized"),
        Refusal(
            name: "an unknown application, a token no application accepts", path: "/datasync/v2/nope/subscriptions/u1",
            token: ("u1", "another-secret-of-at-least-thirty-two-bytes"), status: 401, code: "unauthorized"),
        Refusal(name: "a body that is not JSON", body: "{\"kind\":", status: 400, code: "bad_request"),
        // Which "path" counts would be a guess: refused (issue 33).
        Refusal(name: "a body that repeats a key", body: #"{"kind":"mobile","context":"t","path":"/public","path":"/secret"}"#, status: 400, code: "bad_request"),
        Refusal(name: "an unknown kind", body: #"{"kind":"pager","path":"/a","context":"t"}"#, status: 400, code: "bad_request"),
        Refusal(name: "an unknown webhook", body: #"{"kind":"webhook","destination":"nope","path":"/a"}"#, status: 400, code: "bad_request"),
        Refusal(
            name: "a path over 2048 bytes", body: #"{"kind":"mobile","context":"t","path":"/\#(Array(repeating: "abcdefghij", count: 200).joined(separator: "/"))"}"#,
            status: 400, code: "bad_request"),
        Refusal(name: "a body that is not application/json", contentType: "text/plain", status: 415, code: "unsupported_media_type"),
        Refusal(name: "a body over 64 KiB", body: String(repeating: " ", count: 70_000) + APIHarness.document, status: 413, code: "payload_too_large"),
        Refusal(name: "allowsUpdate that is not a boolean", path: APIHarness.collection + "?allowsUpdate=maybe", status: 400, code: "bad_request"),
        Refusal(name: "a method the collection does not serve", method: .patch, status: 405, code: "method_not_allowed"),
        Refusal(name: "an unknown route", method: .get, path: "/datasync/v1/toto", body: nil, status: 404, code: "not_found"),
        Refusal(name: "an unknown subscription", method: .get, path: APIHarness.collection + "/nope", body: nil, status: 404, code: "not_found"),
        // U+0000: PostgreSQL's text cannot hold it (Schemathesis found the 500); the same 400 on either store.
        Refusal(name: "a context with U+0000", body: #"{"kind":"webhook","destination":"orders","path":"/a","context":"crm\u0000"}"#, status: 400, code: "bad_request"),
        Refusal(name: "a subscription id with %00", method: .get, path: APIHarness.collection + "/ab%00cd", body: nil, status: 400, code: "bad_request"),
    ]

    @Test("an unknown application answers a bad token exactly as a known one does")
    func unknownApplicationLooksKnown() async throws {
        let api = try APIHarness()
        let forged = try api.token("u1", secret: "another-secret-of-at-least-thirty-two-bytes")
        try await api.run { client in
            let known = try await client.send(.get, APIHarness.collection, body: nil, token: forged)
            let unknown = try await client.send(.get, "/datasync/v2/nope/subscriptions/u1", body: nil, token: forged)
            #expect(known.status == 401 && unknown.status == 401)
            #expect(known.body == unknown.body, "\(known.body) / \(unknown.body)")
        }
    }

    @Test("every refusal is a deliberate JSON error with its status and code", arguments: refusalRows)
    func refusals(_ refusal: Refusal) async throws {
        let api = try APIHarness()
        let token = try refusal.token.map { try api.token($0.subject, secret: $0.secret) }
        try await api.run { client in
            let reply = try await client.send(refusal.method, refusal.path, body: refusal.body, token: token, contentType: refusal.contentType)
            #expect(reply.status == refusal.status, "\(reply.body)")
            #expect(reply.code == refusal.code, "\(reply.body)")
            #expect(reply.json?["message"]?.stringValue?.isEmpty == false)
            if refusal.status == 401 { #expect(reply.headers[.wwwAuthenticate]?.hasPrefix("Bearer realm=\"pushdispatch\"") == true) }
            if refusal.status == 405 { #expect(reply.headers[.allow] == "GET, HEAD, POST") }
        }
        #expect(api.index.count == 0)
    }

    @Test("health, readiness as the probe says, and the published keys")
    func operations() async throws {
        let api = try APIHarness()
        let readiness = api.readiness
        try await api.run { client in
            #expect(try await client.send(.get, "/healthz").json == ["status": "ok"])
            #expect(try await client.send(.get, "/readyz").json == ["status": "ready"])
            readiness.current.withLock { $0 = ["status": "paused", "pausedApplications": ["toto"]] }
            let paused = try await client.send(.get, "/readyz")
            #expect(paused.status == 503 && paused.json?["pausedApplications"] == ["toto"])
            #expect(try await client.send(.get, "/.well-known/jwks.json").json == ["keys": []])
        }
    }

    @Test("damaged requests (seeded mutations of valid ones) get a deliberate answer: never a 500, every error in JSON")
    func damaged() async throws {
        let api = try APIHarness()
        let token = try api.token()
        let documents = [
            Self.document, #"{"kind":"webhook","destination":"orders","path":"/orders","context":"crm","mode":"childEvent"}"#,
            #"{"kind":"huawei","path":"/a/b","context":"hms-1","format":"v1","expirationTimestampSeconds":1800000500}"#,
        ]
        try await api.run { client in
            var mutator = Mutator(seed: 20)
            for round in 0..<300 {
                let original = documents[round % documents.count]
                let body: String
                if round % 2 == 0 {
                    body = String(decoding: mutator.mutateBytes(Array(original.utf8)), as: UTF8.self)
                } else {
                    body = mutator.mutateJSON(try JSONParser.parse(Array(original.utf8))).description
                }
                let reply = try await client.send(.post, Self.collection + (round % 3 == 0 ? "?allowsUpdate=true" : ""), body: body, token: token)
                #expect([200, 201, 204, 400, 409, 413].contains(reply.status), "round \(round): \(reply.status) \(reply.body)")
                if reply.status >= 400 { #expect(reply.code != nil, "round \(round): \(reply.body)") }
            }
        }
    }

    @Test("read rules: a node the token's user may not read is refused with 403 permission_denied, at create and at refresh")
    func permissionDenied() async throws {
        let rules = try ReadRules.parse(
            try JSONParser.parse(Array(#"{"rules":{"users":{"$uid":{".read":"auth.uid == $uid || root.child('shared').child($uid).hasChild(auth.uid)"}}}}"#.utf8)))
        let api = try APIHarness(rules: rules, tree: DataTree(root: try JSONParser.parse(Array(#"{"shared":{"u2":{"u1":true}}}"#.utf8))))
        let token = try api.token()
        let big = try api.token(extra: [("profile", .string(String(repeating: "x", count: 5_000)))])
        try await api.run { client in
            func post(_ path: String, _ token: String) async throws -> APIHarness.Reply {
                try await client.send(.post, Self.collection, body: #"{"kind":"mobile","path":"\#(path)","context":"t1"}"#, token: token)
            }
            #expect(try await post("/users/u1/inbox", token).status == 201)
            #expect(try await post("/users/u2", token).status == 201)  // shared with u1
            let refused = try await post("/users/u3", token)
            #expect(refused.status == 403 && refused.code == "permission_denied")
            #expect(refused.json?["message"]?.stringValue == #"the read rules of "toto" do not let "u1" read "/users/u3""#)
            let tooBig = try await post("/users/u1", big)
            #expect(tooBig.status == 400 && tooBig.json?["message"]?.stringValue?.contains("a subscription keeps them") == true)
        }
        // What each subscription keeps: the claims it was allowed with.
        let kept = try await api.store.subscriptions(app: "toto", uid: "u1")
        #expect(kept.count == 2 && kept.allSatisfy { $0.auth?["sub"] == "u1" })
    }
}
