import ArgumentParser
import PushCore
import PushJOSE
import PushJSON
import PushMatching
import PushService

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
        try filterLines(command: "payload", unit: "request line") { line, writer in
            processor.process(line: line, into: &writer)
        }
    }
}
