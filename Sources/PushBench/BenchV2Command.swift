import ArgumentParser
import Crypto
import CryptoExtras
import PushCore
import PushJOSE
import PushJSON
import PushMatching

struct BenchV2: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "v2", abstract: "v2 payload building (sign / encrypt) per algorithm, keys generated in process.")

    @OptionGroup var options: BenchOptions

    @Option(help: "Only algorithms whose label contains this text (e.g. ES256, dir, RSA).")
    var only: String?

    func run() throws {
        let signingEC = ServiceKey.generate()
        let signingHS = try JWK(json: ["kty": "oct", "kid": "hs", "k": .string(Base64URL.encodeToString(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }))])
        let directKey = try JWK(json: ["kty": "oct", "kid": "dir", "use": "enc", "k": .string(Base64URL.encodeToString(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }))])
        let device = P256.KeyAgreement.PrivateKey().publicKey.rawRepresentation
        let deviceEC = try JWK(json: [
            "kty": "EC", "crv": "P-256", "kid": "dev-ec",
            "x": .string(Base64URL.encodeToString(device.prefix(32))), "y": .string(Base64URL.encodeToString(device.suffix(32))),
        ])
        // A fixed 2048-bit modulus would do as well; generating one keeps the bench self-contained.
        let rsa = try _RSA.Encryption.PrivateKey(keySize: .bits2048).publicKey.getKeyPrimitives()
        let deviceRSA = try JWK(json: [
            "kty": "RSA", "kid": "dev-rsa", "n": .string(Base64URL.encodeToString(rsa.modulus)),
            "e": .string(Base64URL.encodeToString(rsa.publicExponent)),
        ])
        let es256 = try JWSSigner(key: signingEC)
        let hs256 = try JWSSigner(key: signingHS)
        let sealers: [(String, any EventSealer)] = [
            ("ES256", SignedEventSealer(signer: es256)),
            ("HS256", SignedEventSealer(signer: hs256)),
            ("dir+A256GCM", EncryptedEventSealer(
                encrypter: try JWEEncrypter(keyAlgorithm: .direct, contentAlgorithm: .a256gcm, key: directKey))),
            ("ECDH-ES+A256KW (nested ES256 JWS)", NestedEventSealer(
                signer: es256, encrypter: try JWEEncrypter(keyAlgorithm: .ecdhESA256KW, contentAlgorithm: .a256gcm, key: deviceEC, contentType: "JWT"))),
            ("RSA-OAEP-256 (nested ES256 JWS)", NestedEventSealer(
                signer: es256, encrypter: try JWEEncrypter(keyAlgorithm: .rsaOAEP256, contentAlgorithm: .a256gcm, key: deviceRSA, contentType: "JWT"))),
        ]
        var rng = BenchRandom(seed: 3)
        let small = Event(app: "toto", path: "/rooms/42/messages", body: .value(BenchData.record(rng: &rng)))
        let kilobyte = Event(app: "toto", path: "/rooms/42/messages", body: .value(BenchData.value(approximateBytes: 1_000, rng: &rng)))
        for (label, event) in [("~130-byte value", small), ("~1 KB value", kilobyte)] {
            for (name, sealer) in sealers where only.map({ name.contains($0) }) ?? true {
                var builder = V2PayloadBuilder()
                var out = JSONWriter(capacity: 8192)
                var bytes = 0
                var failures = 0
                let result = measure(seconds: options.seconds) { _ in
                    out.removeAll()
                    do {
                        try builder.build(event, sealer: sealer, into: &out)
                    } catch {
                        failures += 1
                    }
                    bytes &+= out.count
                }
                precondition(failures == 0, "sealing failed")
                report("v2 \(name), \(label)", result, unit: "payloads", bytes: bytes)
            }
        }
    }
}
