import ArgumentParser
import PushCore
import PushJSON
import PushJOSE
import PushService

struct DecodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Verify and decrypt data payloads: one payload per line in, its event JSON out.",
        discussion: """
            Reads data payloads (v1 or v2, as `payload` writes them) and prints the event object of SPEC §7.3. \
            A line that fails prints {"error":"…"} naming the failure (bad signature, unknown kid, wrong key, \
            malformed token, unsupported algorithm); the exit status is 1 when any line failed.
            """
    )

    @Option(name: .long, help: "JWK Set with the signing keys (to verify) and the encryption keys (application or device private keys).")
    var keys: String?

    func run() throws {
        let decoder = PayloadDecoder(keys: try keys.map(loadKeyRing))
        try filterLines(command: "decode", unit: "payload line") { line, writer in
            do {
                writer.raw(try decoder.decode(Array(line)))
                return true
            } catch {
                writer.raw("{\"error\":")
                writer.writeString(String(describing: error))
                writer.raw("}")
                return false
            }
        }
    }
}
