import Crypto
import Foundation
import PushCore
@testable import PushDelivery
import PushJOSE
import PushTestSupport
import Testing

/// The APNs provider token (issue 24): its shape, verified by an independent JOSE library, and
/// its renewal between APNs's 20 and 60 minutes.
@Suite("APNs provider token", .processLevel)
struct APNsProviderTokenTests {
    static let key = P256.Signing.PrivateKey()

    static func token() throws -> APNsProviderToken {
        try APNsProviderToken(teamID: "TEAM123456", keyID: "KEY1234567", privateKeyPEM: key.pemRepresentation)
    }

    /// The decoded header and claims, as text.
    static func claims(_ token: String) throws -> (header: String, claims: String) {
        let parts = token.split(separator: ".").map { String(decoding: Base64URL.decode(String($0)) ?? [], as: UTF8.self) }
        try #require(parts.count == 3)
        return (parts[0], parts[1])
    }

    @Test("header {alg ES256, kid}, claims {iss, iat as a number}; joserfc verifies it with the key's public part")
    func shape() throws {
        let provider = try Self.token()
        let token = try provider.current(now: 1_800_000_000)
        let (header, claims) = try Self.claims(token)
        #expect(header == #"{"alg":"ES256","kid":"KEY1234567"}"#)
        #expect(claims == #"{"iss":"TEAM123456","iat":1800000000}"#)

        try PythonPackages.require("joserfc")
        let script = """
            import sys
            from joserfc import jwt
            from joserfc.jwk import ECKey
            token = jwt.decode(sys.argv[1], ECKey.import_key(sys.argv[2]), algorithms=["ES256"])
            print(token.header["kid"], token.claims["iss"], token.claims["iat"])
            """
        let process = TestProcesses.make(command: "python3", ["-c", script, token, Self.key.publicKey.pemRepresentation])
        let text = try TestProcesses.output(process)
        #expect(text.trimmingCharacters(in: .whitespacesAndNewlines) == "KEY1234567 TEAM123456 1800000000", "\(text)")
    }

    @Test("one token for 50 minutes, then a new one; an expired answer renews it once, never before 20 minutes")
    func renewal() throws {
        let provider = try Self.token()
        let start: Int64 = 1_800_000_000
        let first = try provider.current(now: start)
        // (seconds after the start, same token as the first?)
        let checks: [(after: Int64, same: Bool)] = [(0, true), (60, true), (1_140, true), (2_999, true), (3_000, false)]
        for check in checks {
            let token = try provider.current(now: start + check.after)
            #expect((token == first) == check.same, "at \(check.after) s")
        }
        let second = try provider.current(now: start + 50 * 60)
        #expect(try Self.claims(second).claims == #"{"iss":"TEAM123456","iat":\#(start + 50 * 60)}"#)
        // APNs says the second expired 5 minutes after it was made: too early to renew.
        #expect(try provider.renew(after: second, now: start + 55 * 60) == nil)
        // 25 minutes after it: renewed, once; a second send answered the same gets that one.
        let third = try #require(try provider.renew(after: second, now: start + 75 * 60))
        #expect(third != second)
        #expect(try provider.renew(after: second, now: start + 75 * 60) == third)
        #expect(try provider.current(now: start + 75 * 60) == third)
        // The clock went back: a token from the future is replaced.
        #expect(try provider.current(now: start) != third)
    }

    @Test("identifiers and keys that cannot be right are refused, naming the key", arguments: [
        ("TEAM12345", "KEY1234567", true, "apns.teamId"),
        ("TEAM123456", "key1234567", true, "apns.keyId"),
        ("TEAM123456", "KEY1234567", false, "apns.privateKey"),
    ])
    func refusals(team: String, keyID: String, goodKey: Bool, field: String) {
        do {
            _ = try APNsProviderToken(teamID: team, keyID: keyID, privateKeyPEM: goodKey ? Self.key.pemRepresentation : "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
            Issue.record("accepted")
        } catch {
            #expect(error.description.hasPrefix(field), "\(error.description)")
        }
    }
}
