import Crypto
import Foundation
import PushCore
@testable import PushDelivery
import PushJOSE
import PushTestSupport
import Testing

/// Web Push's cryptography (issue 24): RFC 8291 message encryption and RFC 8292 VAPID, against
/// the RFCs' own vectors, round trips, hostile input, and independent Python libraries
/// (`http_ece`, `py_vapid`).
@Suite("Web Push: RFC 8291 encryption and RFC 8292 VAPID", .processLevel)
struct WebPushCryptoTests {
    static func bytes(_ base64URL: String) -> [UInt8] { Base64URL.decode(base64URL)! }

    // RFC 8291 Appendix A.
    static let plaintext = Array("When I grow up, I want to be a watermelon".utf8)
    static let senderPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let senderPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let subscriberPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let subscriberPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let auth = "BTBZMqHH6r4Tts7J_aSIgg"
    static let body =
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

    @Test("RFC 8291 Appendix A: the body, byte for byte, from the RFC's keys and salt; and back")
    func appendixA() throws {
        let subscriber = try WebPushSubscriberKeys(p256dh: Self.subscriberPublic, auth: Self.auth)
        let sender = try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.bytes(Self.senderPrivate))
        #expect(Base64URL.encodeToString(sender.publicKey.x963Representation) == Self.senderPublic)
        let body = try WebPushEncryption.encrypt(Self.plaintext, for: subscriber, salt: Self.bytes(Self.salt), senderKey: sender)
        #expect(Base64URL.encodeToString(body) == Self.body)
        #expect(body.count == 144)  // 86 + 41 + 1 + 16
        let receiver = try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.bytes(Self.subscriberPrivate))
        #expect(try WebPushEncryption.decrypt(Self.bytes(Self.body), privateKey: receiver, authSecret: Self.bytes(Self.auth)) == Self.plaintext)
    }

    @Test("round trips from 0 bytes to the most one 4,096-byte body holds; one byte more is refused")
    func roundTrips() throws {
        let receiver = P256.KeyAgreement.PrivateKey()
        let auth = (0..<16).map { UInt8($0 * 7) }
        let subscriber = WebPushSubscriberKeys(publicKey: receiver.publicKey, authSecret: auth)
        var generator = SeededRandom(seed: 8291)
        for size in [0, 1, 15, 16, 17, 1_000, 3_992, WebPushEncryption.maximumPlaintext] {
            let plaintext = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let body = try WebPushEncryption.encrypt(plaintext, for: subscriber)
            #expect(body.count == WebPushEncryption.headerLength + size + 1 + WebPushEncryption.tagLength)
            #expect(body.count <= 4_096)
            #expect(try WebPushEncryption.decrypt(body, privateKey: receiver, authSecret: auth) == plaintext)
        }
        #expect(throws: WebPushEncryption.Failure.self) {
            try WebPushEncryption.encrypt([UInt8](repeating: 1, count: WebPushEncryption.maximumPlaintext + 1), for: subscriber)
        }
        // Another auth secret, another key: refused, saying so.
        let body = try WebPushEncryption.encrypt(Array("secret".utf8), for: subscriber)
        #expect(throws: WebPushEncryption.Failure.self) { try WebPushEncryption.decrypt(body, privateKey: receiver, authSecret: [UInt8](repeating: 0, count: 16)) }
        #expect(throws: WebPushEncryption.Failure.self) { try WebPushEncryption.decrypt(body, privateKey: P256.KeyAgreement.PrivateKey(), authSecret: auth) }
    }

    @Test("subscriber keys: what is wrong is named", arguments: [
        ("not base64!", auth, "keys.p256dh: expected base64url text"),
        (String(subscriberPublic.dropLast(4)), auth, "keys.p256dh: expected the 65-byte uncompressed P-256 point"),
        ("BA" + String(subscriberPublic.dropFirst(2)), auth, "keys.p256dh: not a point of the P-256 curve"),
        (subscriberPublic, "BTBZMqHH6r4Tts7J_aSI", "keys.auth: expected 16 bytes, got 15"),
        (subscriberPublic, "***", "keys.auth: expected base64url text"),
    ])
    func subscriberKeys(p256dh: String, auth: String, message: String) {
        do {
            _ = try WebPushSubscriberKeys(p256dh: p256dh, auth: auth)
            Issue.record("accepted \(p256dh) / \(auth)")
        } catch {
            #expect(error.description.hasPrefix(message), "\(error.description)")
        }
    }

    @Test("damaged bodies (seeded mutations of a valid one) are refused with a reason, never a crash")
    func damagedBodies() throws {
        let receiver = P256.KeyAgreement.PrivateKey()
        let auth = [UInt8](repeating: 9, count: 16)
        let valid = try WebPushEncryption.encrypt(Array("a value of the tree".utf8), for: WebPushSubscriberKeys(publicKey: receiver.publicKey, authSecret: auth))
        var generator = SeededRandom(seed: 2026)
        var refused = 0
        for _ in 0..<3_000 {
            var body = valid
            switch Int.random(in: 0..<4, using: &generator) {
            case 0: body[Int.random(in: 0..<body.count, using: &generator)] ^= UInt8.random(in: 1...255, using: &generator)
            case 1: body = Array(body.prefix(Int.random(in: 0..<body.count, using: &generator)))
            case 2: body += (0..<Int.random(in: 1...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            default: body[16..<21] = [0, 0, UInt8.random(in: 0...255, using: &generator), 0, UInt8.random(in: 0...255, using: &generator)][...]
            }
            guard body != valid else { continue }
            do {
                // The record size is not authenticated (RFC 8188): one still large enough for the
                // record reads the same message. Anything else that decrypts is a forgery.
                let plaintext = try WebPushEncryption.decrypt(body, privateKey: receiver, authSecret: auth)
                #expect(plaintext == Array("a value of the tree".utf8), "a damaged body decrypted: \(Base64URL.encodeToString(body))")
                #expect(body.count == valid.count && body[0..<16] == valid[0..<16] && body[20...] == valid[20...], "only the record size may differ")
            } catch {
                #expect(!error.description.isEmpty)
                refused += 1
            }
        }
        #expect(refused > 2_500)
    }

    // RFC 8292 §2.4's example.
    static let exampleToken =
        "eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9.eyJhdWQiOiJodHRwczovL3B1c2guZXhhbXBsZS5uZXQiLCJleHAiOjE0NTM1MjM3NjgsInN1YiI6Im1haWx0bzpwdXNoQGV4YW1wbGUuY29tIn0.i3CYb7t4xfxCDquptFOepC9GAu_HLGkMlMuCGSK2rpiUfnK9ojFwDXb1JrErtmysazNjjvW2L9OkSSHzvoD1oA"
    static let exampleKey = "BA1Hxzyi1RUM1b5wjxsn7nGxAszw2u61m164i3MrAIxHF6YK5h4SDYic-dRuU_RCPCfA5aq9ojSwk5Y2EmClBPs"

    @Test("RFC 8292's example: the same signing input from the same claims, and its signature verifies")
    func vapidExample() throws {
        let input = VAPIDKey.signingInput(audience: "https://push.example.net", expiresAt: 1_453_523_768, subject: "mailto:push@example.com")
        #expect(String(decoding: input, as: UTF8.self) == Self.exampleToken.split(separator: ".").prefix(2).joined(separator: "."))
        let claims = try VAPIDVerifier.verify("vapid t=\(Self.exampleToken), k=\(Self.exampleKey)", origin: "https://push.example.net", now: 1_453_523_768 - 3_600)
        #expect(claims == .init(audience: "https://push.example.net", expiresAt: 1_453_523_768, subject: "mailto:push@example.com", publicKey: Self.exampleKey))
        // One signature byte changed: refused.
        var forged = Array(Self.exampleToken.utf8)
        forged[forged.count - 5] = forged[forged.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(throws: VAPIDVerifier.Refusal.self) {
            try VAPIDVerifier.verify("vapid t=\(String(decoding: forged, as: UTF8.self)), k=\(Self.exampleKey)", origin: "https://push.example.net", now: 1_453_523_768 - 3_600)
        }
    }

    @Test("our VAPID header verifies, and each claim is checked: audience, expiry within 24 h, contact")
    func vapidClaims() throws {
        let key = VAPIDKey(privateKey: P256.Signing.PrivateKey())
        let now: Int64 = 1_800_000_000
        let header = try key.authorization(audience: "https://fcm.googleapis.com", expiresAt: now + 43_200, subject: "mailto:ops@example.com")
        #expect(try VAPIDVerifier.verify(header, origin: "https://fcm.googleapis.com", now: now).publicKey == key.publicKeyText)
        let refusals: [(String, String, Int64, String)] = [
            (header, "https://updates.push.services.mozilla.com", now, "aud"),
            (header, "https://fcm.googleapis.com", now + 43_200, "exp"),
            (try key.authorization(audience: "https://fcm.googleapis.com", expiresAt: now + 86_401, subject: "mailto:ops@example.com"), "https://fcm.googleapis.com", now, "24 hours"),
            (try key.authorization(audience: "https://fcm.googleapis.com", expiresAt: now + 60, subject: "ops@example.com"), "https://fcm.googleapis.com", now, "sub"),
            ("Bearer x", "https://fcm.googleapis.com", now, "scheme"),
            ("vapid t=a.b.c", "https://fcm.googleapis.com", now, "t= and k="),
        ]
        for (header, origin, at, reason) in refusals {
            do {
                _ = try VAPIDVerifier.verify(header, origin: origin, now: at)
                Issue.record("accepted: \(reason)")
            } catch {
                #expect(error.description.contains(reason), "\(error.description)")
            }
        }
        // Seeded mutations of the header: refused or (a change in a part nobody reads) verified, never a crash.
        var generator = SeededRandom(seed: 8292)
        let valid = Array(header.utf8)
        for _ in 0..<2_000 {
            var mutated = valid
            let index = Int.random(in: 0..<mutated.count, using: &generator)
            mutated[index] = UInt8.random(in: 32...126, using: &generator)
            _ = try? VAPIDVerifier.verify(String(decoding: mutated, as: UTF8.self), origin: "https://fcm.googleapis.com", now: now)
        }
    }

    @Test("independent libraries agree: http_ece decrypts our body, py_vapid verifies our header")
    func pythonOracles() throws {
        try PythonPackages.require("http_ece", package: "http-ece")
        try PythonPackages.require("py_vapid", package: "py-vapid")
        let receiver = P256.KeyAgreement.PrivateKey()
        let auth = (0..<16).map { UInt8(200 - $0) }
        let plaintext = Array(#"{"t":"value","v":"{\"é\":1}"}"#.utf8)
        let body = try WebPushEncryption.encrypt(plaintext, for: WebPushSubscriberKeys(publicKey: receiver.publicKey, authSecret: auth))
        let key = VAPIDKey(privateKey: P256.Signing.PrivateKey())
        let header = try key.authorization(
            audience: "https://push.example.net", expiresAt: Int64(Date().timeIntervalSince1970) + 3_600, subject: "mailto:push@example.com")
        let script = """
            import base64, sys
            import http_ece
            from cryptography.hazmat.primitives.asymmetric import ec
            from py_vapid import Vapid02
            def b(t): return base64.urlsafe_b64decode(t + "=" * (-len(t) % 4))
            private = ec.derive_private_key(int.from_bytes(b(sys.argv[1]), "big"), ec.SECP256R1())
            print(http_ece.decrypt(b(sys.argv[3]), private_key=private, auth_secret=b(sys.argv[2]), version="aes128gcm").hex())
            print(Vapid02.verify(sys.argv[4].replace(", k=", ",k=")))
            """
        let process = TestProcesses.make(
            command: "python3",
            ["-c", script, Base64URL.encodeToString(receiver.rawRepresentation), Base64URL.encodeToString(auth), Base64URL.encodeToString(body), header])
        let text = try TestProcesses.output(process)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first == plaintext.map { String(format: "%02x", $0) }.joined(), "\(text)")
        #expect(lines.dropFirst().first == "True", "\(text)")
    }
}
