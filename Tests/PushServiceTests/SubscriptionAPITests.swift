import Foundation
import NIOHTTP1
import PushCore
import PushJSON
import PushJOSE
import PushStore
@testable import PushService
import PushTestSupport
import Testing

@Suite("Subscription REST API over HTTP", .processLevel, .serialized)
struct SubscriptionAPITests {
    static let collection = "/datasync/v2/toto/subscriptions/u1"
    static let document = #"{"kind":"mobile","mode":"value","path":"/users/u1/inbox","context":"fcm-token-1"}"#

    func withService(_ body: (ServiceHarness) async throws -> Void) async throws {
        let service = try ServiceHarness()
        try await service.start()
        do {
            try await body(service)
        } catch {
            await service.shutdown()
            throw error
        }
        await service.shutdown()
    }

    @Test("subscriptions.maxPerUser: a create past it is 429 too_many_subscriptions; refreshes and other users go on", arguments: [false, true])
    func maxPerUser(postgres: Bool) async throws {
        if postgres && !PostgresTestServer.enabled { return }
        let store = postgres ? "{postgres: \"\(try PostgresTestServer.shared.get().createDatabase())\"}" : "{sqlite: ./store.db}"
        let service = try ServiceHarness(store: store)
        let url = service.folder.appendingPathComponent("pushdispatch.yaml")
        let text = try String(contentsOf: url, encoding: .utf8).replacingOccurrences(of: "maxLifetime: 30d}", with: "maxLifetime: 30d, maxPerUser: 3}")
        try Data(text.utf8).write(to: url)
        try await service.start()
        do {
            let token = try service.token()
            func create(_ n: Int, query: String = "") async throws -> ServiceHarness.Reply {
                try await service.send(
                    .POST, Self.collection + query, body: #"{"kind":"mobile","path":"/users/u1/n\#(n)","context":"fcm-token-1"}"#, token: token)
            }
            var ids: [String] = []
            for n in 1...3 {
                let reply = try await create(n)
                #expect(reply.status == 201)
                ids.append(reply.json?["id"]?.stringValue ?? "")
            }
            let refused = try await create(4)
            #expect(refused.status == 429 && refused.json?["error"] == "too_many_subscriptions", "\(refused.body)")
            #expect(refused.json?["message"]?.stringValue?.contains("has 3 subscriptions") == true)
            // A refresh of one of the three is not a new one.
            #expect(try await create(2, query: "?allowsUpdate=true").status == 200)
            // Another user has a limit of their own.
            let other = try await service.send(
                .POST, "/datasync/v2/toto/subscriptions/u2", body: #"{"kind":"mobile","path":"/users/u2/a","context":"t"}"#,
                token: try service.token(subject: "u2"))
            #expect(other.status == 201)
            // One removed, one more fits.
            #expect(try await service.send(.DELETE, Self.collection + "/" + ids[0], token: token).status == 204)
            #expect(try await create(4).status == 201)
        } catch {
            await service.shutdown()
            throw error
        }
        await service.shutdown()
    }

    @Test("the documented flow: POST with allowsUpdate=true, then DELETE by the id of Content-Location")
    func documentedFlow() async throws {
        try await withService { service in
            let token = try service.token()
            let created = try await service.send(.POST, Self.collection + "?allowsUpdate=true", body: Self.document, token: token)
            #expect(created.status == 201)
            let location = try #require(created.headers["content-location"])
            let id = try #require(created.json?["id"]?.stringValue)
            #expect(location == "\(Self.collection)/\(id)")
            #expect(created.headers["content-type"] == "application/json")
            let document = try #require(created.json)
            #expect(document["kind"] == "mobile" && document["mode"] == "value" && document["path"] == "/users/u1/inbox")
            #expect(document["app"] == "toto" && document["uid"] == "u1" && document["context"] == "fcm-token-1")
            #expect(document["createdAt"] == .int(1_800_000_000))
            #expect(document["expirationTimestampSeconds"] == .int(1_800_000_000 + 7 * 86_400))
            // Keys come out in key order.
            #expect(created.body.hasPrefix(#"{"app":"toto","context":"fcm-token-1","createdAt":"#))

            let refreshed = try await service.send(.POST, Self.collection + "?allowsUpdate=true", body: Self.document, token: token)
            #expect(refreshed.status == 200)
            #expect(refreshed.json?["id"]?.stringValue == id)

            #expect(try await service.send(.DELETE, location, token: token).status == 204)
            #expect(try await service.send(.DELETE, location, token: token).status == 404)
            #expect(try await service.send(.GET, Self.collection, token: token).body == "[]")
        }
    }

    @Test("create, conflict, refresh, read, list, PUT and removal answer the documented codes")
    func statusCodes() async throws {
        try await withService { service in
            let token = try service.token()
            let created = try await service.send(.POST, Self.collection, body: Self.document, token: token)
            #expect(created.status == 201)
            let location = created.headers["content-location"]!
            let conflict = try await service.send(.POST, Self.collection, body: Self.document, token: token)
            #expect(conflict.status == 409)
            #expect(conflict.json?["error"] == "conflict")
            #expect(conflict.json?["message"]?.stringValue?.contains("allowsUpdate=true") == true)
            #expect(try await service.send(.GET, location, token: token).json?["id"] == created.json?["id"])
            let webhook = #"{"kind":"webhook","path":"/orders","destination":"orders","context":"ctx"}"#
            #expect(try await service.send(.POST, Self.collection, body: webhook, token: token).status == 201)
            let list = try await service.send(.GET, Self.collection, token: token)
            #expect(list.status == 200 && list.json?.arrayValue?.count == 2)
            // A mode the client leaves out is noData.
            #expect(try await service.send(.GET, Self.collection, token: token).json?.arrayValue?.contains { $0["mode"] == "noData" } == true)

            // PUT refreshes the expiration, capped at the maximum lifetime.
            let put = try await service.send(.PUT, location, body: #"{"expirationTimestampSeconds":1900000000}"#, token: token)
            #expect(put.status == 200 && put.json?["expirationTimestampSeconds"] == .int(1_800_000_000 + 30 * 86_400))
            let kept = try await service.send(.PUT, location, body: #"{"expirationTimestampSeconds":1800000100}"#, token: token)
            #expect(kept.json?["expirationTimestampSeconds"] == .int(1_800_000_100))
            let defaulted = try await service.send(.PUT, location, token: token)
            #expect(defaulted.status == 200 && defaulted.json?["expirationTimestampSeconds"] == .int(1_800_000_000 + 7 * 86_400))
            #expect(try await service.send(.PUT, location, body: #"{"mode":"value"}"#, token: token).status == 400)
            #expect(try await service.send(.PUT, Self.collection + "/nope", token: token).status == 404)
            #expect(try await service.send(.GET, Self.collection + "/nope", token: token).status == 404)

            // expirationTimestampSeconds 0 removes: by POST (204 even twice) and by PUT.
            let removal = #"{"kind":"webhook","path":"/orders","destination":"orders","context":"ctx","expirationTimestampSeconds":0}"#
            #expect(try await service.send(.POST, Self.collection, body: removal, token: token).status == 204)
            #expect(try await service.send(.POST, Self.collection, body: removal, token: token).status == 204)
            #expect(try await service.send(.PUT, location, body: #"{"expirationTimestampSeconds":0}"#, token: token).status == 204)
            #expect(try await service.send(.GET, location, token: token).status == 404)
        }
    }

    @Test("bad documents are 400 with a message that says what is wrong", arguments: [
        (#"{"kind":"mobile","mode":"loud","path":"/p","context":"t"}"#, #"mode: expected one of "noData", "value", "childEvent", got "loud""#),
        (#"{"kind":"email","path":"/p","context":"t"}"#, "kind: expected one of"),
        (#"{"kind":"mobile","path":"/p"}"#, "context: missing"),
        (#"{"kind":"mobile","context":"t"}"#, "path: missing"),
        (#"{"kind":"mobile","path":"/a.b","context":"t"}"#, "contains '.'"),
        (#"{"kind":"mobile","path":"/\#(String(repeating: "x", count: 2050))","context":"t"}"#, "a key is at most 768 bytes"),
        (#"{"kind":"webhook","path":"/p","destination":"nope"}"#, #"destination: "nope" is not a webhook of this application (configured: "orders")"#),
        (#"{"kind":"mobile","path":"/p","context":"t","destination":"orders"}"#, "only webhook subscriptions have a destination"),
        (#"{"kind":"mobile","path":"/p","context":"t","format":"v3"}"#, "format: expected one of"),
        (#"{"kind":"mobile","path":"/p","context":"t","colour":"red"}"#, #"unknown field "colour""#),
        (#"{"kind":"mobile","path":"/p","context":"t","expirationTimestampSeconds":100}"#, "is not in the future"),
        (#"{"kind":"mobile","path":"/p","context":"t","uid":"u2"}"#, "differs from the uid in the URL"),
        (#"{"kind":"mobile","path":"/p","context":"t","encryption":{"alg":"A192KW","kid":"enc-kw"}}"#, "encryption.alg: unsupported algorithm"),
        (#"{"kind":"mobile","path":"/p","context":"t","encryption":{"alg":"dir","kid":"missing"}}"#, "encryption.kid: unknown kid"),
        (#"{"kind":"mobile","path":"/p","context":"t","encryption":{"alg":"ECDH-ES","kid":"d"}}"#, "encryption.jwk: missing"),
        (#"{"kind":"mobile","path":"/p","context":"t","encryption":{"alg":"ECDH-ES","kid":"d","jwk":{"kty":"oct","k":"AAAA"}}}"#, "private members"),
        (#"{"kind":"mobile","path":"/p","context":"t","encryption":{"alg":"RSA-OAEP-256","kid":"d","jwk":{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}}}"#, "RSA-OAEP-256 needs an RSA key"),
        ("[1]", "expected a JSON object"),
        ("{nope", "the body is not valid JSON"),
    ])
    func badDocuments(body: String, message: String) async throws {
        try await withService { service in
            let reply = try await service.send(.POST, Self.collection, body: body, token: try service.token())
            #expect(reply.status == 400)
            #expect(reply.json?["error"] == "bad_request")
            #expect(reply.json?["message"]?.stringValue?.contains(message) == true, "got \(reply.body)")
        }
    }

    @Test("valid encryption blocks are stored as given")
    func encryption() async throws {
        try await withService { service in
            let device = try Fixtures.publicJWK("dev-ec")
            let body = #"{"kind":"mobile","path":"/p","context":"t","encryption":{"alg":"ECDH-ES+A256KW","kid":"dev-ec","jwk":\#(device)}}"#
            let reply = try await service.send(.POST, Self.collection, body: body, token: try service.token())
            #expect(reply.status == 201)
            #expect(reply.json?["encryption"]?["alg"] == "ECDH-ES+A256KW" && reply.json?["encryption"]?["enc"] == "A256GCM")
            let symmetric = #"{"kind":"mobile","path":"/q","context":"t","encryption":{"alg":"dir","kid":"enc-dir"}}"#
            #expect(try await service.send(.POST, Self.collection, body: symmetric, token: try service.token()).status == 201)
        }
    }

    @Test("media type, body size, unknown routes and applications")
    func protocolErrors() async throws {
        try await withService { service in
            let token = try service.token()
            let plain = try await service.send(.POST, Self.collection, body: Self.document, token: token, contentType: "text/plain")
            #expect(plain.status == 415 && plain.json?["error"] == "unsupported_media_type")
            let none = try await service.send(.POST, Self.collection, body: Self.document, token: token, contentType: nil)
            #expect(none.status == 415)
            let charset = try await service.send(
                .POST, Self.collection, body: Self.document, token: token, contentType: "application/json; charset=utf-8")
            #expect(charset.status == 201)
            let huge = #"{"kind":"mobile","path":"/p","context":"\#(String(repeating: "x", count: 70_000))"}"#
            let tooLarge = try await service.send(.POST, Self.collection, body: huge, token: token)
            #expect(tooLarge.status == 413 && tooLarge.json?["error"] == "payload_too_large")
            let unknownApp = try await service.send(.GET, "/datasync/v2/nope/subscriptions/u1", token: token)
            #expect(unknownApp.status == 404 && unknownApp.json?["error"] == "not_found")
            #expect(try await service.send(.GET, "/nothing/here", token: token).status == 404)
            #expect(try await service.send(.POST, Self.collection + "?allowsUpdate=maybe", body: Self.document, token: token).status == 400)
        }
    }

    @Test("the auth matrix: no token, malformed, bad signature, expired, not yet valid, no subject, another uid, another app")
    func authentication() async throws {
        try await withService { service in
            func status(_ token: String?, authorization: String? = nil, path: String = Self.collection) async throws -> (Int, String?, String?) {
                let reply = try await service.send(.GET, path, token: token, authorization: authorization)
                return (reply.status, reply.json?["error"]?.stringValue, reply.headers["www-authenticate"])
            }
            let none = try await status(nil)
            #expect(none.0 == 401 && none.1 == "unauthorized" && none.2 == "Bearer realm=\"pushdispatch\"")
            #expect(try await status(nil, authorization: "Basic dTE6cHc=").0 == 401)
            #expect(try await status("not-a-jwt").0 == 401)
            let malformed = try await status("a.b.c")
            #expect(malformed.0 == 401 && malformed.2?.contains("invalid_token") == true)
            let forged = try service.token(secret: "a-different-secret-of-thirty-two-bytes!!")
            #expect(try await status(forged).0 == 401)
            #expect(try await status(try service.token(expiresIn: -3600)).0 == 401)
            #expect(try await status(try service.token(expiresIn: -30)).0 == 200)  // within the leeway
            #expect(try await status(try service.token(notBefore: 1_800_003_600)).0 == 401)
            #expect(try await status(try service.token(subject: nil)).0 == 401)
            #expect(try await status(try service.token(subject: nil, extra: [("uid", "u1")])).0 == 200)
            let anotherUser = try await status(try service.token(subject: "u2"))
            #expect(anotherUser.0 == 403 && anotherUser.1 == "forbidden")
            // A token for another application verifies with neither's key in the other's URL.
            let otherApp = try service.token(secret: ServiceHarness.otherSecret)
            #expect(try await status(otherApp).0 == 401)
            #expect(try await status(otherApp, path: "/datasync/v2/other/subscriptions/u1").0 == 200)
            #expect(try await status(try service.token(), path: "/datasync/v2/other/subscriptions/u1").0 == 401)
        }
    }

    @Test("100 concurrent creates of one tuple make one subscription")
    func concurrentCreates() async throws {
        try await withService { service in
            let token = try service.token()
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<100 {
                    group.addTask { try await service.send(.POST, Self.collection, body: Self.document, token: token).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 201 }.count == 1)
            #expect(statuses.filter { $0 == 409 }.count == 99)
            #expect(try await service.send(.GET, Self.collection, token: token).json?.arrayValue?.count == 1)
        }
    }

    @Test("a restart keeps subscriptions and the service key")
    func restart() async throws {
        let service = try ServiceHarness()
        try await service.start()
        let token = try service.token()
        _ = try await service.send(.POST, Self.collection, body: Self.document, token: token)
        let jwks = try await service.send(.GET, "/.well-known/jwks.json", token: nil).body
        await service.stop()
        try await service.start()
        #expect(try await service.send(.GET, Self.collection, token: token).json?.arrayValue?.count == 1)
        #expect(try await service.send(.GET, "/.well-known/jwks.json", token: nil).body == jwks)
        await service.shutdown()
    }

    @Test("jwks.json publishes the service key and the application's asymmetric signing key, public parts only")
    func jwks() async throws {
        try await withService { service in
            let reply = try await service.send(.GET, "/.well-known/jwks.json", token: nil)
            let keys = try #require(reply.json?["keys"]?.arrayValue)
            #expect(keys.count == 2)
            #expect(keys.allSatisfy { $0["d"] == nil && $0["kty"] == "EC" })
            #expect(keys.contains { $0["kid"] == "sig-es" })
            #expect(try await service.send(.GET, "/healthz", token: nil).json?["status"] == "ok")
            #expect(try await service.send(.GET, "/readyz", token: nil).status == 200)
        }
    }

    @Test("a validly signed token with exp or nbf at the limits of Int64 is answered, not a crash")
    func tokensAtTheLimits() async throws {
        try await withService { service in
            let now = service.clock.nowSeconds
            let farFuture = try service.token(expiresIn: Int64.max - now)
            #expect(try await service.send(.GET, Self.collection, token: farFuture).status == 200)
            let nearMax = try service.token(expiresIn: Int64.max - now - 59)
            #expect(try await service.send(.GET, Self.collection, token: nearMax).status == 200)
            let notBefore = try service.token(notBefore: .max)
            #expect(try await service.send(.GET, Self.collection, token: notBefore).status == 401)
            let expired = try service.token(expiresIn: Int64.min / 2)
            #expect(try await service.send(.GET, Self.collection, token: expired).status == 401)
        }
    }

    @Test("a token's subject must be the uid byte for byte: canonically equivalent is not the same user")
    func uidBytes() async throws {
        try await withService { service in
            for (subject, uid) in [("\u{212A}evin", "Kevin"), ("cafe\u{301}", "caf%C3%A9"), ("caf\u{E9}", "cafe%CC%81")] {
                let token = try service.token(subject: subject)
                let reply = try await service.send(.GET, "/datasync/v2/toto/subscriptions/\(uid)", token: token)
                #expect(reply.status == 403, "\(subject) on \(uid): \(reply.status)")
            }
        }
    }

    @Test("expired subscriptions are removed by the sweeper and a revoke with reason expired is recorded")
    func expiry() async throws {
        try await withService { service in
            let token = try service.token()
            let body = #"{"kind":"mobile","path":"/p","context":"t","expirationTimestampSeconds":1800000010}"#
            #expect(try await service.send(.POST, Self.collection, body: body, token: token).status == 201)
            _ = try await service.send(.POST, Self.collection, body: Self.document, token: token)
            // The sweeper swept at start and sleeps for its interval (1 s) on the service's clock.
            await service.clock.waitForSleepers(ServiceHarness.sleepers)
            await service.advance(by: .seconds(9))  // a pass at +9 s: not expired yet
            #expect(try await service.send(.GET, Self.collection, token: try service.token()).json?.arrayValue?.count == 2)
            await service.advance(by: .milliseconds(999))  // the sweeper's next pass is at +10 s
            #expect(try await service.send(.GET, Self.collection, token: try service.token()).json?.arrayValue?.count == 2)
            await service.advance(by: .milliseconds(1))  // +10 s: the expiration is reached
            #expect(try await service.send(.GET, Self.collection, token: try service.token()).json?.arrayValue?.count == 1)
            let store = try SQLiteStore(path: service.folder.appendingPathComponent("store.db").path)
            let outbox = try await store.notifications(limit: 10)
            #expect(outbox.count == 1 && outbox[0].entry.notification == .revoke)
            // A v2 revoke (the service's own key signs: toto's signingKey is sig-es).
            let payload = try JSONParser.parse(outbox[0].entry.payload)
            #expect(payload["ver"] == "v2" && payload["kid"] == nil)
        }
    }
}

enum Fixtures {
    static func publicJWK(_ kid: String) throws -> String {
        let ring = try KeyRing(jwkSetText: [UInt8](try Data(contentsOf: ServiceHarness.fixtures.appendingPathComponent("jose/test-keyset.json"))))
        return ring.key(kid: kid)!.publicJSON!.description
    }
}
