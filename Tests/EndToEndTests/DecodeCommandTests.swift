import Foundation
import Testing
import PushTestSupport

@Suite("pushdispatch payload (v2) and decode, run as processes", .processLevel)
struct DecodeCommandTests {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures/jose")
    static let keySet = fixtures.appendingPathComponent("test-keyset.json").path

    /// The test key set as JSON objects, by kid.
    static func keys() throws -> [[String: Any]] {
        let data = try Data(contentsOf: URL(fileURLWithPath: keySet))
        return (try JSONSerialization.jsonObject(with: data) as! [String: Any])["keys"] as! [[String: Any]]
    }

    /// Writes a JWK Set to a temporary file.
    static func writeKeySet(_ keys: [[String: Any]]) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("keys-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: ["keys": keys]).write(to: url)
        return url.path
    }

    static func publicJWK(_ kid: String) throws -> String {
        var key = try keys().first { $0["kid"] as? String == kid }!
        for member in ["d", "p", "q", "dp", "dq", "qi"] { key[member] = nil }
        return String(decoding: try JSONSerialization.data(withJSONObject: key), as: UTF8.self)
    }

    static func requests() throws -> [String] {
        let encryptions = [
            "", #","encryption":{"alg":"dir","enc":"A256GCM","kid":"enc-dir"}"#,
            #","encryption":{"alg":"A128KW","enc":"A128GCM","kid":"enc-kw128"}"#,
            #","encryption":{"alg":"ECDH-ES+A256KW","kid":"dev-ec","jwk":\#(try publicJWK("dev-ec"))}"#,
            #","encryption":{"alg":"RSA-OAEP-256","kid":"dev-rsa","jwk":\#(try publicJWK("dev-rsa"))}"#,
        ]
        var lines: [String] = []
        for signing in ["sig-es", "sig-hs", "sig-ed"] {
            for encryption in encryptions {
                lines.append(#"{"app":"toto","path":"/p","mode":"childEvent","format":"v2","signing":"\#(signing)","before":{"a":1},"after":{"b":[true]}\#(encryption)}"#)
            }
        }
        lines.append(#"{"app":"toto","path":"/r","format":"v2","signing":"sig-es","revoke":"expired"}"#)
        lines.append(#"{"app":"toto","path":"/v","format":"v1","mode":"value","after":"x"}"#)
        return lines
    }

    @Test("decode reverses payload for every algorithm")
    func roundTrip() throws {
        let requests = try Self.requests()
        let payloads = try Executable.run(["payload", "--keys", Self.keySet], input: requests.joined(separator: "\n") + "\n")
        #expect(payloads.status == 0, "\(payloads.stderr)")
        #expect(payloads.lines.count == requests.count)
        let events = try Executable.run(["decode", "--keys", Self.keySet], input: payloads.stdout)
        #expect(events.status == 0, "\(events.stdout)")
        let expected = Array(repeating: #"{"t":"v","m":"childEvent","a":"toto","p":"/p","s":"OK","c":{"a":{"b":{"0":true}},"r":["a"],"c":{}}}"#, count: 15)
            + [#"{"t":"r","a":"toto","p":"/r","r":"expired"}"#, #"{"t":"v","m":"value","a":"toto","p":"/v","s":"OK","v":"x"}"#]
        #expect(events.lines == expected)
    }

    func firstPayload(_ request: String) throws -> String {
        let result = try Executable.run(["payload", "--keys", Self.keySet], input: request + "\n")
        #expect(result.status == 0)
        return result.lines[0]
    }

    func decodeError(_ payload: String, keys: String = DecodeCommandTests.keySet) throws -> String {
        let result = try Executable.run(["decode", "--keys", keys], input: payload + "\n")
        #expect(result.status == 1)
        return result.lines.first ?? ""
    }

    @Test("tampered signatures, swapped keys, unknown kids, wrong keys and bad tokens are each reported by name")
    func failures() throws {
        let signed = try firstPayload(#"{"app":"toto","path":"/p","mode":"value","format":"v2","signing":"sig-es","after":1}"#)
        // A tampered signature: change one character of the last part.
        let end = signed.range(of: #"","ver""#)!.lowerBound
        let tampered = signed.replacingCharacters(in: signed.index(end, offsetBy: -3)..<end, with: "AAA")
        #expect(tampered != signed)
        #expect(try decodeError(tampered) == #"{"error":"bad signature"}"#)
        // Swapped keys: sig-es replaced by another key under the same kid.
        var keys = try Self.keys()
        let index = keys.firstIndex { $0["kid"] as? String == "sig-es" }!
        let other = keys.first { $0["kid"] as? String == "dev-ec" }!
        keys[index] = other.merging(["kid": "sig-es", "use": "sig", "alg": "ES256"]) { $1 }
        #expect(try decodeError(signed, keys: try Self.writeKeySet(keys)) == #"{"error":"bad signature"}"#)
        // Unknown kid.
        let withoutSigner = try Self.keys().filter { $0["kid"] as? String != "sig-es" }
        #expect(try decodeError(signed, keys: try Self.writeKeySet(withoutSigner)) == #"{"error":"unknown kid \"sig-es\""}"#)
        // Wrong key for an encrypted payload.
        let encrypted = try firstPayload(
            #"{"app":"toto","path":"/p","format":"v2","signing":"sig-hs","encryption":{"alg":"dir","kid":"enc-dir"}}"#)
        var swapped = try Self.keys()
        let dir = swapped.firstIndex { $0["kid"] as? String == "enc-dir" }!
        swapped[dir]["k"] = swapped.first { $0["kid"] as? String == "enc-kw" }!["k"]
        #expect(try decodeError(encrypted, keys: try Self.writeKeySet(swapped)).hasPrefix(#"{"error":"wrong key: "#))
        // Malformed tokens and unsupported algorithms.
        #expect(try decodeError(#"{"srv":"webcom","evt":"x.y.z","ver":"v2"}"#).hasPrefix(#"{"error":"malformed token: "#))
        func header(_ json: String) -> String {
            Data(json.utf8).base64EncodedString()
                .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        }
        let ps256 = header(#"{"alg":"PS256","kid":"sig-es"}"#)
        #expect(try decodeError(#"{"srv":"webcom","evt":"\#(ps256).e30.AAAA","ver":"v2"}"#) == #"{"error":"unsupported algorithm \"PS256\""}"#)
        // RS256 is known (bearer tokens), but an EC key cannot verify it.
        let rs256 = header(#"{"alg":"RS256","kid":"sig-es"}"#)
        #expect(try decodeError(#"{"srv":"webcom","evt":"\#(rs256).e30.AAAA","ver":"v2"}"#).hasPrefix(#"{"error":"key does not fit: "#))
    }

    @Test("payload without --keys refuses v2 lines but serves v1 ones")
    func withoutKeys() throws {
        let result = try Executable.run(["payload"], input: #"{"app":"a","path":"/p","format":"v2"}"# + "\n" + #"{"app":"a","path":"/p","format":"v1"}"# + "\n")
        #expect(result.status == 1)
        #expect(result.lines == [#"{"error":"format v2 needs JOSE signing keys; pass --keys with a JWK Set"}"#, #"{"t":"noData","app":"a","sp":"/p"}"#])
    }

    @Test("an unreadable or invalid key file stops the command with a message")
    func badKeyFile() throws {
        let missing = try Executable.run(["payload", "--keys", "/nonexistent/keys.json"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("cannot read the JWK Set /nonexistent/keys.json"))
        let invalid = try Self.writeKeySet([["kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"]])
        let result = try Executable.run(["payload", "--keys", invalid])
        #expect(result.status != 0)
        #expect(result.stderr.contains("x and y must be 32 bytes each"))
    }
}
