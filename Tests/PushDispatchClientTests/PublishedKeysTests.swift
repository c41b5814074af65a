import Foundation
import PushCore
import PushJOSE
import Synchronization
import Testing

@testable import PushDispatchClient

/// The service's published keys: only public signature keys are taken; they are cached, and
/// fetched again for an unknown kid at most every refetch interval.
@Suite("Published keys and the service's error answers")
struct PublishedKeysTests {
    /// A JWK Set with a public EC key, a private Ed25519 key (its `d` must be dropped), a
    /// secret key and an encryption key (both ignored).
    static let jwks = """
        {"keys":[
        {"kty":"EC","crv":"P-256","kid":"sig-es","use":"sig","x":"uf8IDaz7ZUxqbr18dkJSQunvaO-08ErA5n-zGqxqVgs","y":"OLB6NUDR7-0jw0CiUJ-mq_lRX1HMVP88fzb0hvoGRuA"},
        {"kty":"OKP","crv":"Ed25519","kid":"sig-ed","x":"PCO_jyMcxtTDH6-KGd2KX6vsvISvOwyhxLUlT8PjHzc","d":"-yg40uxutDqRmgV95yoKq3WVS_cZPeKTy36tYdyVtRc"},
        {"kty":"oct","kid":"sig-hs","alg":"HS256","k":"-my9YWu_TjJXYtBnH9PbtAx7xsNTpHVLsz1Shi4RdkM"},
        {"kty":"EC","crv":"P-256","kid":"enc-ec","use":"enc","x":"uf8IDaz7ZUxqbr18dkJSQunvaO-08ErA5n-zGqxqVgs","y":"OLB6NUDR7-0jw0CiUJ-mq_lRX1HMVP88fzb0hvoGRuA"}
        ]}
        """

    @Test("only public signature keys are kept")
    func filtered() throws {
        let keys = try PublishedKeys.signatureKeys(Array(Self.jwks.utf8))
        #expect(keys.map(\.kid) == ["sig-es", "sig-ed"])
        #expect(keys.allSatisfy { !$0.isPrivate && $0.use == "sig" })
        #expect(throws: PushClientError(.invalidResponse, "")) { try PublishedKeys.signatureKeys(Array("<html>".utf8)) }
    }

    @Test("cached for maxAge; an unknown kid fetches again at most every refetch interval; a failed fetch keeps the old keys")
    func caching() async throws {
        let fetches = Mutex(0)
        let failing = Mutex(false)
        let clock = Mutex(Duration.zero)
        let keys = PublishedKeys(
            fetch: { () async throws(PushClientError) -> [UInt8] in
                fetches.withLock { $0 += 1 }
                if failing.withLock({ $0 }) { throw PushClientError(.transport, "down") }
                return Array(Self.jwks.utf8)
            },
            maxAge: .seconds(3600), refetchInterval: .seconds(60), now: { clock.withLock { $0 } })
        #expect(try await keys.current().count == 2)
        #expect(try await keys.current().count == 2)
        #expect(fetches.withLock { $0 } == 1)
        #expect(try await keys.refetchForUnknownKey() == false)
        clock.withLock { $0 = .seconds(61) }
        #expect(try await keys.refetchForUnknownKey() == true)
        #expect(try await keys.refetchForUnknownKey() == false)
        #expect(fetches.withLock { $0 } == 2)
        clock.withLock { $0 = .seconds(4000) }
        failing.withLock { $0 = true }
        #expect(try await keys.current().count == 2, "the old keys, the service being unreachable")
        #expect(fetches.withLock { $0 } == 3)
        #expect(try await keys.refetchForUnknownKey() == false, "a failed fetch counts for the interval")
    }

    @Test(
        "an error answer becomes the server's code and message; a body without one, a code from the status",
        arguments: [
            (403, #"{"error":"permission_denied","message":"the read rules of \"toto\" do not let \"u\" read \"/p\""}"#, "permission_denied", "read rules"),
            (429, #"{"error":"too_many_subscriptions","message":"…"}"#, "too_many_subscriptions", "…"),
            (409, #"{"error":"conflict","message":"exists"}"#, "conflict", "exists"),
            (413, "", "payload_too_large", "without an error body"),
            (413, #"{"error":"payload_too_large","message":"the request body is larger than 65536 bytes"}"#, "payload_too_large", "65536"),
            (502, "<html>bad gateway</html>", "unavailable", "without an error body"),
            (500, #"{"error":"internal_error","message":"internal error; the service logged it"}"#, "internal_error", "logged"),
            (418, "", "invalid_response", "without"),
            (400, #"{"error":"a_code_added_later","message":"new"}"#, "a_code_added_later", "new"),
        ])
    func errorAnswers(status: Int, body: String, code: String, mentions: String) {
        let error = HTTPAnswer(status: status, contentLocation: nil, body: Array(body.utf8)).error
        #expect(error.code == PushClientError.Code(code) && error.message.contains(mentions) && error.status == status)
        #expect(error.description.hasPrefix(code + ": "))
    }
}
