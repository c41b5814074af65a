import Crypto
import CryptoExtras
import PushCore
import PushFakes
import PushHTTP
import PushJOSE
import PushJSON
import PushTestSupport
import Testing

@testable import PushDelivery

/// Push Kit v3 for HarmonyOS (issue 34): the service-account JWT, the request body, and every
/// answer class, from Huawei's documented answers (`fixtures/providers/harmony-*`).
@Suite("Push Kit v3 (HarmonyOS)")
struct HarmonyTests {
    static let now: Int64 = 1_700_000_000_000
    static let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)

    static func keyFile(_ members: [String: String]) -> [UInt8] {
        var object: [(Key, JSON)] = [
            ("project_id", .string("101234567")), ("key_id", .string("kid-1")), ("sub_account", .string("sub-9")),
            ("private_key", .string(key.pemRepresentation)), ("token_uri", .string(HarmonyServiceAccount.defaultAudience)),
        ]
        for (name, value) in members {
            object.removeAll { $0.0 == Key(name) }
            if !value.isEmpty { object.append((Key(name), .string(value))) }
        }
        return Array(JSON.object(JSONObject(object)).description.utf8)
    }

    @Test("the JWT: PS256 over header.claims, kid = key_id, iss = sub_account, aud = token_uri, an hour; its signature verifies with the public key")
    func jwt() throws {
        let account = try HarmonyServiceAccount(json: Self.keyFile([:]))
        #expect(account.projectID == "101234567")
        let jwt = try account.jwt(now: Self.now / 1_000)
        let parts = jwt.split(separator: ".").map(String.init)
        try #require(parts.count == 3)
        let header = try JSONParser.parse(try #require(Base64URL.decode(parts[0])))
        let claims = try JSONParser.parse(try #require(Base64URL.decode(parts[1])))
        #expect(header["alg"]?.stringValue == "PS256" && header["kid"]?.stringValue == "kid-1" && header["typ"]?.stringValue == "JWT")
        #expect(claims["iss"]?.stringValue == "sub-9" && claims["aud"]?.stringValue == "https://oauth-login.cloud.huawei.com/oauth2/v3/token")
        #expect(claims["iat"]?.integerValue == Self.now / 1_000 && claims["exp"]?.integerValue == Self.now / 1_000 + 3_600)
        let signature = _RSA.Signing.RSASignature(rawRepresentation: try #require(Base64URL.decode(parts[2])))
        let input = Array((parts[0] + "." + parts[1]).utf8)
        #expect(Self.key.publicKey.isValidSignature(signature, for: SHA256.hash(data: input), padding: .PSS))
        #expect(!Self.key.publicKey.isValidSignature(signature, for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5))
        // Without token_uri: Huawei's documented audience.
        let defaulted = try HarmonyServiceAccount(json: Self.keyFile(["token_uri": ""]))
        #expect(defaulted.tokenURI == HarmonyServiceAccount.defaultAudience)
    }

    @Test(
        "a key file that cannot be used says which field, never the key",
        arguments: [
            ("project_id", "", "no \"project_id\" string"),
            ("project_id", "1 2", "is not a project id"),
            ("key_id", "", "no \"key_id\" string"),
            ("sub_account", "", "no \"sub_account\" string"),
            ("private_key", "", "no \"private_key\" string"),
            ("private_key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----", "private_key is not a PEM RSA private key"),
        ])
    func refusedKeyFiles(field: String, value: String, message: String) {
        do {
            _ = try HarmonyServiceAccount(json: Self.keyFile([field: value]))
            Issue.record("accepted")
        } catch {
            #expect("\(error)".contains(message), "\(error)")
            #expect(!"\(error)".contains("BEGIN RSA") && !"\(error)".contains(String(Self.key.pemRepresentation.dropFirst(40).prefix(30))))
        }
        #expect(throws: JOSEError.self) { try HarmonyServiceAccount(json: Array("[1]".utf8)) }
        #expect(throws: JOSEError.self) { try HarmonyServiceAccount(json: Array("{".utf8)) }
    }

    @Test("seeded mutations of a key file: accepted or refused with a JOSEError, never a crash, never the key in the message", arguments: [1, 2] as [UInt64])
    func mutatedKeyFiles(seed: UInt64) {
        var mutator = Mutator(seed: seed)
        let valid = Self.keyFile([:])
        let secret = String(Self.key.pemRepresentation.dropFirst(40).prefix(30))
        for _ in 0..<300 {
            do {
                _ = try HarmonyServiceAccount(json: mutator.mutateBytes(valid))
            } catch {
                #expect(!"\(error)".contains(secret) && "\(error)".utf8.count < 1_000)
            }
        }
    }

    @Test("the body: the payload as the string extraData, the token in an array of one")
    func body() throws {
        let body = ProviderMessages.harmony(token: "MAAALgE4", data: Array(#"{"s":"OK","d":"{\"é\":1}"}"#.utf8))
        let json = try JSONParser.parse(body)
        #expect(json["payload"]?["extraData"]?.stringValue == #"{"s":"OK","d":"{\"é\":1}"}"#)
        #expect(json["target"]?["token"]?.arrayValue?.compactMap(\.stringValue) == ["MAAALgE4"])
    }

    func answer(_ name: String) -> ProviderAnswer {
        let recorded = ProviderFixtures.answer(name)
        return ProviderAnswer(status: recorded.status, retryAfter: recorded.retryAfter, body: recorded.body)
    }

    @Test(
        "Huawei's documented answers, each in its class of SPEC §8",
        arguments: [
            ("harmony-success", "t1", ClassifierTests.Class.delivered),
            ("harmony-partial", "illegal-token", .revokeDead), ("harmony-partial", "good-token", .delivered),
            ("harmony-all-tokens-invalid", "unregistered-token", .revokeDead),
            ("harmony-no-push-type-right", "t1", .pause),
            ("harmony-auth-error", "t1", .refresh), ("harmony-jwt-expired", "t1", .refresh),
            ("harmony-not-allowed", "t1", .pause), ("harmony-penalised", "t1", .pause), ("harmony-jwt-too-long", "t1", .pause),
            ("harmony-too-large", "t1", .failed), ("harmony-payload-error", "t1", .failed),
            ("harmony-internal", "t1", .retry),
        ])
    func answers(name: String, token: String, expected: ClassifierTests.Class) {
        let outcome = AnswerClassifier.harmony(answer(name), token: token, now: Self.now)
        #expect(ClassifierTests.classOf(outcome) == expected, "\(outcome)")
        if case .delivered(let reference, _) = outcome { #expect(reference?.hasPrefix("15744095554950000100200") == true) }
    }

    @Test(
        "codes and statuses not recorded: the table's other rows",
        arguments: [
            (503, #"{"code":"80000000"}"#, ClassifierTests.Class.slowDown), (502, "<html>", .retry), (504, "", .retry),
            (200, #"{"code":"80300029","msg":"test limit"}"#, .slowDown), (400, #"{"code":"80300036"}"#, .pause),
            (400, #"{"code":"80300010"}"#, .failed), (400, #"{"code":"80100004"}"#, .failed),
            (200, #"{"code":80000000}"#, .delivered), (200, "{}", .retry), (200, "not json", .retry),
            (401, "", .refresh), (404, "", .pause), (400, #"{"code":"89999999"}"#, .revoke),
            (400, #"{"code":"80300007","msg":"{\"illegalTokens\":{\"appinfoError\":[\"t\"]}}"}"#, .retry),
            (400, #"{"code":"80300007","msg":"not json"}"#, .revokeDead),
            (400, #"{"code":"80300007","msg":"{\"illegalTokens\":{\"noRight\":[\"t\"]}}"}"#, .revokeDead),
        ])
    func codes(status: Int, body: String, expected: ClassifierTests.Class) {
        let outcome = AnswerClassifier.harmony(ProviderAnswer(status: status, body: Array(body.utf8)), token: "t", now: Self.now)
        #expect(ClassifierTests.classOf(outcome) == expected, "\(status) \(body): \(outcome)")
    }

    @Test("seeded mutations of answers: a class each, no crash, bounded reasons")
    func mutatedAnswers() {
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        let seeds = ["harmony-success", "harmony-partial", "harmony-all-tokens-invalid", "harmony-jwt-expired"].map { Array(ProviderFixtures.answer($0).body) }
        for _ in 0..<3_000 {
            var bytes = seeds[Int(next() % UInt64(seeds.count))]
            for _ in 0..<(1 + Int(next() % 6)) where !bytes.isEmpty {
                let at = Int(next() % UInt64(bytes.count))
                switch next() % 3 {
                case 0: bytes.remove(at: at)
                case 1: bytes.insert(UInt8(truncatingIfNeeded: next()), at: at)
                default: bytes[at] = UInt8(truncatingIfNeeded: next())
                }
            }
            let status = [200, 400, 401, 500, 503][Int(next() % 5)]
            let outcome = AnswerClassifier.harmony(ProviderAnswer(status: status, body: bytes), token: "illegal-token", now: Self.now)
            switch outcome {
            case .delivered: break
            case .retry(let reason, _, _), .refreshCredentials(let reason), .revokeDeadToken(let reason), .revoke(let reason), .pause(let reason), .failed(let reason):
                #expect(reason.utf8.count <= 300)
            }
        }
    }
}
