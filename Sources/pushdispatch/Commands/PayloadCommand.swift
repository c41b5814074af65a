import ArgumentParser
import PushCore
import PushJOSE

struct PayloadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payload",
        abstract: "Build data payloads: one JSON request per line on standard input, one payload per line out.",
        discussion: """
            Each request is {"app","path","mode","format","before","after"} or {"app","path","format","revoke"} \
            (SPEC §7.5). A bad line prints {"error":"…"} in its place and the command goes on; the exit status \
            is 1 when any line failed.
            """
    )

    @Option(name: .long, help: "JWK Set with the signing keys and symmetric encryption keys, by kid (v2).")
    var keys: String?

    func run() throws {
        var processor: PayloadLineProcessor
        if let keys {
            let factory = EventSealerFactory(keys: try loadKeyRing(keys))
            processor = PayloadLineProcessor { request throws in
                try factory.sealer(signing: request.signing, encryption: request.encryption)
            }
        } else {
            processor = PayloadLineProcessor()
        }
        var output = OutputBuffer(descriptor: 1)
        var reader = LineReader(descriptor: 0)
        var writer = JSONWriter(capacity: 8192)
        var failures = 0
        var ioError: IOError?
        try reader.forEachLine({ line in
            writer.removeAll()
            if !processor.process(line: line, into: &writer) { failures += 1 }
            writer.raw(UInt8(ascii: "\n"))
            writer.withUnsafeBytes { output.bytes.append(contentsOf: $0) }
        }, onChunkEnd: {
            do throws(IOError) { try output.flush() } catch { ioError = error }
        })
        try output.flush()
        if let ioError { throw ioError }
        if failures > 0 {
            printError("pushdispatch payload: \(failures) request line\(failures == 1 ? "" : "s") failed")
            throw ExitCode(1)
        }
    }
}
