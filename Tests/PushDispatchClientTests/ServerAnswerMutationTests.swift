import Foundation
import PushCore
import PushJSON
import PushTestSupport
import Testing

@testable import PushDispatchClient

/// Seeded, bounded mutation suites over what the service answers (a network may be hostile):
/// subscription documents, error bodies and the published key set never crash the client; each
/// damaged answer is read or refused with a deliberate error.
@Suite("Bad input: damaged answers of the service")
struct ServerAnswerMutationTests {
    static let rounds = 1_000
    static let document: JSON = [
        "app": "toto", "context": "device-1", "createdAt": 1_800_000_000, "encryption": ["alg": "dir", "enc": "A256GCM", "kid": "enc-dir"],
        "expirationTimestampSeconds": 1_800_600_000, "format": "v2", "id": "0123456789abcdef0123456789abcdef", "kind": "mobile",
        "mode": "value", "path": "/rooms/lobby", "uid": "alice",
    ]

    static func client() throws -> SubscriptionClient {
        SubscriptionClient(
            rest: try RESTClient(
                baseURL: URL(string: "http://127.0.0.1:9")!, app: "toto", credentials: { _ in Credentials(uid: "u", token: "t") },
                timeout: .seconds(1), session: RefusingRedirects.session()))
    }

    @Test("damaged subscription documents are read or refused as invalid answers", arguments: [11, 12] as [UInt64])
    func documents(seed: UInt64) throws {
        let client = try Self.client()
        #expect(try client.subscription(Self.document).path == "/rooms/lobby")
        var mutator = Mutator(seed: seed)
        var refused = 0
        for _ in 0..<Self.rounds {
            do {
                _ = try client.subscription(mutator.mutateJSON(Self.document))
            } catch {
                refused += 1
                #expect(error.code == .invalidResponse && error.message.utf8.count <= 700)
            }
        }
        #expect(refused > 0)
    }

    @Test("damaged error bodies still give a code and a bounded message", arguments: [13, 14] as [UInt64])
    func errorBodies(seed: UInt64) {
        let body = Array(#"{"error":"permission_denied","message":"the read rules of \"toto\" do not let \"u\" read \"/p\""}"#.utf8)
        var mutator = Mutator(seed: seed)
        for _ in 0..<Self.rounds {
            let error = HTTPAnswer(status: 403, contentLocation: nil, body: mutator.mutateBytes(body)).error
            #expect(!error.code.name.isEmpty && error.code.name.utf8.count <= 64 && error.message.utf8.count <= 700)
        }
    }

    @Test("a damaged key set is read (public signature keys only) or refused", arguments: [15, 16] as [UInt64])
    func keySets(seed: UInt64) {
        let text = Array(PublishedKeysTests.jwks.utf8)
        var mutator = Mutator(seed: seed)
        for _ in 0..<Self.rounds {
            do {
                let keys = try PublishedKeys.signatureKeys(mutator.mutateBytes(text))
                #expect(keys.allSatisfy { !$0.isPrivate && $0.use == "sig" && $0.kid != nil })
            } catch {
                #expect(error.code == .invalidResponse)
            }
        }
    }
}
