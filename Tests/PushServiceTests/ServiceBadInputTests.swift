import Foundation
import NIOHTTP1
import PushCore
import PushJSON
import PushTestSupport
@testable import PushService
import Testing

/// Seeded, bounded mutation suites over the service's inputs: configuration text and REST
/// requests. Nothing crashes; every refusal is deliberate, bounded, and never shows a secret;
/// no damaged token gets a 2xx.
@Suite("Bad input: configuration and REST requests", .serialized, .processLevel)
struct ServiceBadInputTests {
    static let secret = "the-auth-secret-that-must-never-show-0123456789"
    static let hmsSecret = "hms-client-secret-that-must-never-show"

    static func configuration() -> String {
        """
        store: {sqlite: /tmp/pushdispatch-fuzz.db}
        http: {host: 127.0.0.1, port: 8080}
        delivery:
          retry: {initial: 1s, multiplier: 2, jitter: 0.2, window: 2h}
          timeout: 10s
          concurrency: {perProvider: 256, perApp: 64}
        expiry: {interval: 15s}
        apps:
          toto:
            auth: {hs256Secret: "\(secret)", issuer: null, leeway: 60s}
            fcm: {serviceAccountFile: \(ConfigurationTests.serviceAccount), endpoint: "https://fcm.googleapis.com"}
            hms: {clientId: "1234567", clientSecret: "\(hmsSecret)", endpoint: "https://push-api.cloud.huawei.com"}
            webhooks:
              orders: {url: "https://example.com/hooks/orders", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
            subscriptions: {defaultLifetime: 7d, maxLifetime: 30d, maxWeight: 1MiB}
        """
    }

    @Test("damaged configurations load or are refused without a secret in any message", arguments: [1, 2, 3] as [UInt64])
    func damagedConfigurations(seed: UInt64) throws {
        var mutator = Mutator(seed: seed)
        let text = Self.configuration()
        let bytes = Array(text.utf8)
        // Damage everything but the secrets' own text (a damaged secret is no longer that secret).
        let protected = [Self.secret, Self.hmsSecret].map { secret -> Range<Int> in
            let start = text.utf8.distance(from: text.utf8.startIndex, to: text.range(of: secret)!.lowerBound.samePosition(in: text.utf8)!)
            return (start - 1)..<(start + secret.utf8.count + 1)
        }
        var loaded = 0
        for round in 0..<1_500 {
            var damaged: [UInt8] = []
            var cursor = 0
            for range in protected + [bytes.count..<bytes.count] {
                damaged += mutator.random.chance(50) ? mutator.mutateBytes(Array(bytes[cursor..<range.lowerBound])) : Array(bytes[cursor..<range.lowerBound])
                damaged += bytes[range.lowerBound..<min(range.upperBound, bytes.count)]
                cursor = min(range.upperBound, bytes.count)
            }
            let damagedText = String(decoding: damaged, as: UTF8.self)
            // A secret is a secret while it is the value of its key: damage that moves its text
            // into a key name or a path makes it part of what the message is about.
            var secrets: [String] = []
            if let json = try? ConfigurationLoader.parseYAML(damagedText, source: "fuzz") {
                if json["apps"]?["toto"]?["auth"]?["hs256Secret"] == .string(Self.secret) { secrets.append(Self.secret) }
                if json["apps"]?["toto"]?["hms"]?["clientSecret"] == .string(Self.hmsSecret) { secrets.append(Self.hmsSecret) }
            } else {
                secrets = [Self.secret, Self.hmsSecret]
            }
            do {
                _ = try ConfigurationLoader.load(text: damagedText, baseDirectory: "/tmp", environment: [:])
                loaded += 1
            } catch let error as ConfigurationError {
                for problem in error.problems.map(\.description) {
                    #expect(!secrets.contains { problem.contains($0) }, "seed \(seed) round \(round): \(problem)")
                    #expect(problem.utf8.count <= 3000, "seed \(seed) round \(round)")
                }
            }
        }
        #expect(loaded > 0)
    }

    @Test("damaged REST requests get deliberate JSON errors; damaged tokens never get a 2xx", arguments: [1, 2] as [UInt64])
    func damagedRequests(seed: UInt64) async throws {
        let service = try ServiceHarness()
        try await service.start()
        defer { Task { await service.shutdown() } }
        var mutator = Mutator(seed: seed)
        let token = try service.token()
        let document = try JSONParser.parse(#"{"kind":"mobile","mode":"value","path":"/users/u1","context":"fcm-1","format":"v1"}"#)
        let collection = "/datasync/v2/toto/subscriptions/u1"
        var statuses: [Int: Int] = [:]
        for round in 0..<250 {
            let kind = mutator.random.below(4)
            var method = HTTPMethod.POST
            var path = collection
            var body: String? = document.description
            var bearer: String? = token
            var contentType: String? = "application/json"
            switch kind {
            case 0: body = mutator.mutateJSON(document).description
            case 1: body = String(decoding: mutator.mutateBytes(Array(document.description.utf8)), as: UTF8.self)
            case 2: bearer = String(decoding: mutator.mutateBytes(Array(token.utf8)), as: UTF8.self)
            default:
                method = mutator.random.pick([.GET, .PUT, .DELETE, .POST])
                path = collection + "/" + String(decoding: mutator.mutateBytes(Array("0123456789abcdef0123456789abcdef".utf8)), as: UTF8.self)
                    .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                contentType = mutator.random.pick(["application/json", "text/plain", "application/json; charset=utf-8"])
            }
            // Control characters cannot be sent in a header at all (the client refuses them).
            if let value = bearer, value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) { bearer = nil }
            let reply = try await service.send(method, path, body: body, token: bearer, contentType: contentType)
            statuses[reply.status, default: 0] += 1
            #expect(reply.status != 500, "seed \(seed) round \(round): 500 for \(method) \(path.prefix(80)): \(reply.body.prefix(200))")
            if reply.status >= 400 {
                #expect(reply.json?["error"]?.stringValue != nil && reply.json?["message"]?.stringValue != nil, "seed \(seed) round \(round)")
                #expect(reply.body.utf8.count <= 4000, "seed \(seed) round \(round): \(reply.body.prefix(300))")
                #expect(!reply.body.contains(ServiceHarness.secret))
            }
            if kind == 2, bearer != token {
                #expect(!(200..<300).contains(reply.status), "seed \(seed) round \(round): a damaged token got \(reply.status)")
            }
        }
        #expect(statuses.keys.contains { (200..<300).contains($0) } && statuses.keys.contains(400) && statuses.keys.contains(401))
        await service.shutdown()
    }

    @Test("damaged operations requests (bodies, queries, paths) get deliberate JSON errors, never a 500", arguments: [1, 2] as [UInt64])
    func damagedOperationsRequests(seed: UInt64) async throws {
        let service = try ServiceHarness()
        try await service.start()
        defer { Task { await service.shutdown() } }
        var mutator = Mutator(seed: seed)
        let bodies: [(String, JSON)] = [
            ("/ops/v1/senders/resume", try JSONParser.parse(#"{"app":"toto","provider":"webhook","destination":"orders"}"#)),
            ("/ops/v1/recover", try JSONParser.parse(#"{"app":"toto","provider":"fcm","since":1700000000000}"#)),
            ("/ops/v1/rules/simulate", try JSONParser.parse(#"{"app":"toto","path":"/users/u1","auth":{"uid":"u1","token":{"admin":true}}}"#)),
        ]
        let queries = [
            "/ops/v1/subscriptions?app=toto&uid=u1&path=/users/u1&limit=10&cursor=5", "/ops/v1/subscriptions/toto/abc/history?limit=2&cursor=9",
            "/ops/v1/records/toto/12",
        ]
        var statuses: [Int: Int] = [:]
        for round in 0..<300 {
            let reply: ServiceHarness.Reply
            if mutator.random.chance(50) {
                let (path, document) = mutator.random.pick(bodies)
                let body =
                    mutator.random.chance(50)
                    ? mutator.mutateJSON(document).description : String(decoding: mutator.mutateBytes(Array(document.description.utf8)), as: UTF8.self)
                reply = try await service.send(.POST, path, body: body, token: nil, contentType: mutator.random.pick(["application/json", "text/plain"]))
            } else {
                let damaged = String(decoding: mutator.mutateBytes(Array(mutator.random.pick(queries).utf8)), as: UTF8.self)
                // What a client can send: the damage percent-encoded, the route's slashes kept.
                let path = "/" + damaged.drop { $0 == "/" }.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charactersIn: "#")))!
                reply = try await service.send(.GET, path, token: nil)
            }
            statuses[reply.status, default: 0] += 1
            #expect(reply.status != 500, "seed \(seed) round \(round): \(reply.body.prefix(200))")
            if reply.status >= 400 {
                #expect(reply.json?["error"]?.stringValue != nil && reply.json?["message"]?.stringValue != nil, "seed \(seed) round \(round): \(reply.body.prefix(200))")
                #expect(reply.body.utf8.count <= 4000)
            }
        }
        #expect(statuses.keys.contains(200) && statuses.keys.contains(400), "\(statuses)")
        await service.shutdown()
    }
}
