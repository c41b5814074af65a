import Foundation
import Testing
import PushCore
import PushJSON
@testable import PushJOSE

@Suite("Decoding payloads back to events")
struct DecoderTests {
    @Test("v1 payloads of every mode decode to the v2 event object", arguments: [
        (#"{"t":"noData","app":"toto","sp":"/p"}"#, #"{"t":"v","m":"noData","a":"toto","p":"/p"}"#),
        (#"{"t":"revoke","r":"expired","app":"toto","sp":"/p"}"#, #"{"t":"r","a":"toto","p":"/p","r":"expired"}"#),
        (#"{"s":"OK","t":"value","app":"toto","sp":"/p","d":"{\"b\":1,\"a\":2}"}"#, #"{"t":"v","m":"value","a":"toto","p":"/p","s":"OK","v":{"a":2,"b":1}}"#),
        (#"{"s":"OK","t":"value","app":"toto","sp":"/p","d":"null"}"#, #"{"t":"v","m":"value","a":"toto","p":"/p","s":"OK","v":null}"#),
        (#"{"s":"TooBig","t":"value","app":"toto","sp":"/p"}"#, #"{"t":"v","m":"value","a":"toto","p":"/p","s":"TooBig"}"#),
        (#"{"s":"OnlyKeys","t":"childEvent","app":"toto","sp":"/p","added":"{\"x\":true}","removed":"[\"y\"]","changed":"{}"}"#,
         #"{"t":"v","m":"childEvent","a":"toto","p":"/p","s":"OnlyKeys","c":{"a":{"x":true},"r":["y"],"c":{}}}"#),
    ])
    func v1(payload: String, event: String) throws {
        #expect(String(decoding: try PayloadDecoder(keys: nil).decode(bytes(payload)), as: UTF8.self) == event)
    }

    @Test("bad payloads are named", arguments: [
        ("nope", "not JSON"),
        (#"{"srv":"webcom","evt":"a.b","ver":"v2"}"#, "neither a compact JWS"),
        (#"{"srv":"webcom","evt":1,"ver":"v2"}"#, "every value is a string"),
        (#"{"t":"value","app":"a","sp":"/p","s":"Maybe"}"#, "s must be"),
    ])
    func bad(payload: String, message: String) throws {
        #expect {
            _ = try PayloadDecoder(keys: try Fixtures.keyRing()).decode(bytes(payload))
        } throws: { error in
            String(describing: error).contains(message)
        }
    }
}

@Suite("The service's own signing key")
struct ServiceKeyTests {
    /// A store in a JSON file: real persistence for the hook (PushStore keeps it in the database).
    struct FileStore: ServiceKeyStore {
        let url: URL
        func loadServiceKeys() async throws -> [JSON] {
            guard let data = FileManager.default.contents(atPath: url.path) else { return [] }
            return try JSONParser.parse([UInt8](data))["keys"]!.arrayValue!
        }
        func createServiceKeyIfNone(_ jwk: JSON, kid: String) async throws -> [JSON] {
            let stored = try await loadServiceKeys()
            if !stored.isEmpty { return stored }
            let json = JSON.object(JSONObject([(Key("keys"), JSON.array([jwk]))]))
            try Data(json.description.utf8).write(to: url)
            return [jwk]
        }
    }

    @Test("a key is created once, kept, and published without its private part")
    func createOnce() async throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("service-key-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: url) }
        let first = try await ServiceKey.loadOrCreate(in: FileStore(url: url))
        let second = try await ServiceKey.loadOrCreate(in: FileStore(url: url))
        #expect(first.count == 1 && second.count == 1)
        #expect(first[0].thumbprint == second[0].thumbprint)
        #expect(first[0].kid == first[0].thumbprint)
        let jwks = ServiceKey.publicJWKSet(second)
        let published = jwks["keys"]!.arrayValue!
        #expect(published.count == 1)
        #expect(published[0]["d"] == nil)
        #expect(published[0]["alg"] == "ES256" && published[0]["use"] == "sig")
        // What is published verifies what the key signs.
        let token = try JWSSigner(key: second[0]).sign(bytes("{}"))
        #expect(try JWS.verify(token, keys: KeyRing(jwkSet: jwks)).payload == bytes("{}"))
    }
}
