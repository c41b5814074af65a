import PushCore
@testable import PushJOSE
import PushJSON
import PushMatching
import Testing

@Suite("v2 payloads (SPEC §7.3, §7.4)")
struct V2PayloadTests {
    let factory: EventSealerFactory

    init() throws {
        factory = EventSealerFactory(keys: try Fixtures.keyRing())
    }

    static let encryptions: [EncryptionSpec?] = [
        nil, EncryptionSpec(alg: "dir", enc: "A256GCM", kid: "enc-dir"), EncryptionSpec(alg: "A128KW", enc: "A128GCM", kid: "enc-kw128"),
        EncryptionSpec(alg: "ECDH-ES", kid: "dev-ec"), EncryptionSpec(alg: "ECDH-ES+A256KW", kid: "dev-ec"),
        EncryptionSpec(alg: "RSA-OAEP-256", kid: "dev-rsa"),
    ]

    func sealer(_ signing: String, _ encryption: EncryptionSpec?) throws -> any EventSealer {
        var spec = encryption
        if let kid = spec?.kid, kid.hasPrefix("dev-") { spec?.jwk = try Fixtures.key(kid).publicJSON }
        return try factory.sealer(signing: signing, encryption: spec)
    }

    func build(_ event: Event, _ sealer: any EventSealer) throws -> (String, PayloadStatus?) {
        var builder = V2PayloadBuilder()
        var out = JSONWriter()
        let status = try builder.build(event, sealer: sealer, into: &out)
        return (out.string, status)
    }

    @Test("payloads have srv, kid (encrypted only), evt, ver in order, and decode to the event", arguments: encryptions)
    func shapeAndRoundTrip(encryption: EncryptionSpec?) throws {
        let event = Event(app: "toto", path: "/p", body: .value(["a": "b"]))
        let (payload, status) = try build(event, try sealer("sig-es", encryption))
        #expect(status == .ok)
        // Field order on the raw text (parsing would sort the keys).
        let prefix = encryption.map { #"{"srv":"webcom","kid":"\#($0.kid!)","evt":""# } ?? #"{"srv":"webcom","evt":""#
        #expect(payload.hasPrefix(prefix))
        #expect(payload.hasSuffix(#"","ver":"v2"}"#))
        let decoded = try PayloadDecoder(keys: try Fixtures.keyRing()).decode(bytes(payload))
        #expect(String(decoding: decoded, as: UTF8.self) == #"{"t":"v","m":"value","a":"toto","p":"/p","s":"OK","v":{"a":"b"}}"#)
    }

    @Test("every sealer predicts its token length exactly", arguments: encryptions)
    func predictedLengths(encryption: EncryptionSpec?) throws {
        for signing in ["sig-es", "sig-hs", "sig-ed"] {
            let sealer = try sealer(signing, encryption)
            for length in [0, 1, 2, 3, 100, 1000] {
                let event = [UInt8](repeating: UInt8(ascii: "x"), count: length)
                #expect(try sealer.seal(event).count == sealer.sealedLength(eventLength: length))
            }
        }
    }

    @Test("the size rule applies to the final length: OK below 4064, then OnlyKeys, then TooBig", arguments: encryptions)
    func sizeRule(encryption: EncryptionSpec?) throws {
        let sealer = try sealer("sig-es", encryption)
        // Grow a value until the payload crosses the limit; the status must switch exactly there.
        var previous: PayloadStatus? = .ok
        var switched = false
        for size in stride(from: 2000, to: 3400, by: 1) {
            let (payload, status) = try build(Event(app: "toto", path: "/v", body: .value(.string(String(repeating: "y", count: size)))), sealer)
            let eventLength = #"{"t":"v","m":"value","a":"toto","p":"/v","s":"OK","v":""}"#.utf8.count + size
            let shell = #"{"srv":"webcom","evt":"","ver":"v2"}"#.utf8.count + (encryption.map { #","kid":"\#($0.kid!)""#.utf8.count } ?? 0)
            let okLength = sealer.sealedLength(eventLength: eventLength)! + shell
            if status == .ok {
                #expect(payload.utf8.count < PayloadLimit.bytes)
                #expect(payload.utf8.count == okLength)
            } else {
                #expect(status == .tooBig)
                #expect(okLength >= PayloadLimit.bytes)
                if previous == .ok { switched = true }
            }
            previous = status
            if switched { break }
        }
        #expect(switched)
        // childEvent: many short keys make OnlyKeys fit where values do not.
        let added = (0..<60).map { (Key("child-\($0)"), JSON.string(String(repeating: "v", count: 60))) }
        let (_, status) = try build(Event(app: "toto", path: "/c", body: .childEvent(ChildDiff(added: added))), sealer)
        #expect(status == .onlyKeys)
        let many = (0..<400).map { (Key("a-rather-long-child-key-\($0)"), JSON.bool(true)) }
        let (tooBig, tooBigStatus) = try build(Event(app: "toto", path: "/c", body: .childEvent(ChildDiff(added: many))), sealer)
        #expect(tooBigStatus == .tooBig)
        #expect(tooBig.utf8.count < PayloadLimit.bytes)
    }

    @Test("request errors name the field", arguments: [
        (nil as String?, nil as EncryptionSpec?, "several signing keys"),
        ("nope", nil, "signing: unknown kid \"nope\""),
        ("enc-dir", nil, "signing: unknown kid \"enc-dir\""),
        ("sig-es", EncryptionSpec(alg: "A192KW", kid: "enc-kw"), "encryption.alg: unsupported algorithm \"A192KW\""),
        ("sig-es", EncryptionSpec(alg: "dir", enc: "A192GCM", kid: "enc-dir"), "encryption.enc: unsupported algorithm \"A192GCM\""),
        ("sig-es", EncryptionSpec(alg: "dir"), "encryption.kid: missing"),
        ("sig-es", EncryptionSpec(alg: "dir", kid: "missing"), "encryption.kid: unknown kid \"missing\""),
        ("sig-es", EncryptionSpec(alg: "dir", kid: "enc-dir128"), "needs a 256-bit key"),
        ("sig-es", EncryptionSpec(alg: "ECDH-ES", kid: "dev-ec"), "encryption.jwk: missing"),
    ])
    func requestErrors(signing: String?, encryption: EncryptionSpec?, message: String) {
        #expect {
            _ = try factory.sealer(signing: signing, encryption: encryption)
        } throws: { error in
            String(describing: error).contains(message)
        }
    }
}
