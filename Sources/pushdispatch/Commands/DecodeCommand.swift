import ArgumentParser
import PushCore
import PushJOSE

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
        var output = OutputBuffer(descriptor: 1)
        var reader = LineReader(descriptor: 0)
        var writer = JSONWriter(capacity: 8192)
        var failures = 0
        var ioError: IOError?
        try reader.forEachLine({ line in
            writer.removeAll()
            do {
                writer.raw(try decoder.decode(Array(line)))
            } catch {
                failures += 1
                writer.removeAll()
                writer.raw("{\"error\":")
                writer.writeString(String(describing: error))
                writer.raw("}")
            }
            writer.raw(UInt8(ascii: "\n"))
            writer.withUnsafeBytes { output.bytes.append(contentsOf: $0) }
        }, onChunkEnd: {
            do throws(IOError) { try output.flush() } catch { ioError = error }
        })
        try output.flush()
        if let ioError { throw ioError }
        if failures > 0 {
            printError("pushdispatch decode: \(failures) payload line\(failures == 1 ? "" : "s") failed")
            throw ExitCode(1)
        }
    }
}
