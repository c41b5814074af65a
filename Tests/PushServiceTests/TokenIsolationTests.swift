import Foundation
import PushCore
@testable import PushService
import Testing

/// A token issued for one application must never act on another (SPEC §11.10).
@Suite("Bearer tokens stay with their application")
struct TokenIsolationTests {
    static let secret = "a-secret-shared-by-two-applications!!"
    static let jwks = ConfigurationTests.fixtures.appendingPathComponent("jose/test-keyset.json").path

    func prepare(_ text: String) throws {
        let configuration = try ConfigurationLoader.load(text: text, baseDirectory: "/tmp", environment: [:])
        _ = try ServiceRuntime.applications(configuration)
    }

    func refusal(_ text: String) -> String? {
        do {
            try prepare(text)
            return nil
        } catch {
            return String(describing: error)
        }
    }

    @Test("two applications sharing an HS256 secret are refused, naming both and the fix")
    func sharedSecret() {
        let reason = refusal(
            """
            apps:
              alpha: {auth: {hs256Secret: "\(Self.secret)"}}
              beta: {auth: {hs256Secret: "\(Self.secret)"}}
            """)
        #expect(reason?.contains("apps.alpha.auth and apps.beta.auth verify bearer tokens with the same key") == true, "\(String(describing: reason))")
        #expect(reason?.contains("apps.alpha.auth.audience, apps.beta.auth.audience") == true)
        #expect(reason?.contains(Self.secret) == false)
    }

    @Test("two applications sharing a JWK Set are refused")
    func sharedJWKS() {
        let reason = refusal(
            """
            apps:
              alpha: {auth: {jwks: \(Self.jwks)}}
              beta: {auth: {jwks: \(Self.jwks)}}
            """)
        #expect(reason?.contains("verify bearer tokens with the same key") == true, "\(String(describing: reason))")
    }

    @Test("an audience (or issuer) on one side only does not separate them")
    func oneSidedAudience() {
        #expect(refusal(
            """
            apps:
              alpha: {auth: {hs256Secret: "\(Self.secret)", audience: alpha}}
              beta: {auth: {hs256Secret: "\(Self.secret)"}}
            """) != nil)
        #expect(refusal(
            """
            apps:
              alpha: {auth: {hs256Secret: "\(Self.secret)", audience: same}}
              beta: {auth: {hs256Secret: "\(Self.secret)", audience: same}}
            """) != nil)
    }

    @Test("distinct audiences or issuers, or distinct keys, are accepted")
    func separated() throws {
        try prepare(
            """
            apps:
              alpha: {auth: {hs256Secret: "\(Self.secret)", audience: alpha}}
              beta: {auth: {hs256Secret: "\(Self.secret)", audience: beta}}
            """)
        try prepare(
            """
            apps:
              alpha: {auth: {hs256Secret: "\(Self.secret)", issuer: "https://a"}}
              beta: {auth: {hs256Secret: "\(Self.secret)", issuer: "https://b"}}
            """)
        try prepare(
            """
            apps:
              alpha: {auth: {hs256Secret: "\(Self.secret)"}}
              beta: {auth: {hs256Secret: "another-secret-of-at-least-32-bytes"}}
            """)
    }
}
