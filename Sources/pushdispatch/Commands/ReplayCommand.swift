import ArgumentParser
import PushCore
import PushJOSE
import PushService

#if canImport(Glibc)
import Glibc
#endif

struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Run a change stream through the matching and payload code, starting from empty trees, and print each notification.",
        discussion: """
            One line per notification, in the order the service would deliver them (record order; within a \
            record, by subscription id): {"seq","subscription","kind","context","destination","payload"}. A webhook's \
            payload is its body without "id". Invalid lines are reported on standard error (line number and reason) \
            and skipped; the exit status is then 1. With --dry-run nothing is sent and nothing is written: the \
            configured store is read if it exists, never created or written (SPEC §7.6, §11.12).
            """
    )

    @Option(help: "Configuration file: applications (keys, signingKey, webhooks, maxWeight) and the store to read subscriptions from.")
    var config: String?

    @Option(help: "Subscription documents, one JSON object per line, each with its app and uid.")
    var subscriptions: String?

    @Option(help: "JWK Set for applications the configuration does not name (signing and symmetric encryption keys).")
    var keys: String?

    @Flag(help: "Print the notifications; send and write nothing (required).")
    var dryRun = false

    @Argument(help: "Change records, one JSON object per line (NDJSON).")
    var changes: String

    func run() async throws {
        guard dryRun else {
            throw ValidationError(
                "replay runs with --dry-run only: to process records for real, feed them to a running service (ingest.queueFile or ingest.socket)")
        }
        let configuration = try config.map { try loadConfiguration($0, purpose: .replay) }
        var subscriptionLines: [[UInt8]] = []
        if let subscriptions {
            subscriptionLines = splitLines(try readFile(subscriptions, what: "the subscriptions file"))
        }
        var session: ReplaySession
        do {
            session = try await ReplaySession.prepare(
                .init(configuration: configuration, subscriptionLines: subscriptionLines, keys: try keys.map(loadKeyRing)))
        } catch let error as ConfigurationError {
            reportConfigurationProblems(error, path: config ?? "")
            throw ExitCode(2)
        } catch let error as ReplayError {
            printError("pushdispatch replay: \(error)")
            throw ExitCode(2)
        }
        for note in session.notes { printError("pushdispatch replay: \(note)") }
        let descriptor = open(changes, O_RDONLY)
        guard descriptor >= 0 else {
            throw ValidationError("cannot read the change stream \(changes): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var output = OutputBuffer(descriptor: 1)
        var writer = JSONWriter(capacity: 1 << 16)
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var lineNumber = 0
        var invalid = 0
        var reported = session.notes.count
        func handle(_ line: [UInt8]) async throws {
            lineNumber += 1
            writer.removeAll()
            if let error = try await session.replay(line, into: &writer) {
                invalid += 1
                printError("line \(lineNumber): \(error.reason)")
            }
            writer.withUnsafeBytes { output.bytes.append(contentsOf: $0) }
            for note in session.notes.dropFirst(reported) { printError("pushdispatch replay: \(note)") }
            reported = session.notes.count
            if output.bytes.count > 1 << 16 { try output.flush() }
        }
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ValidationError("reading \(changes) failed: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            pending.append(contentsOf: chunk[0..<count])
            var start = 0
            while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                try await handle(Array(pending[start..<newline]))
                start = newline + 1
            }
            pending.removeSubrange(0..<start)
        }
        if !pending.isEmpty { try await handle(pending) }
        try output.flush()
        if invalid > 0 {
            printError("pushdispatch replay: \(invalid) invalid line\(invalid == 1 ? "" : "s") skipped")
            throw ExitCode(1)
        }
    }
}

/// The lines of a text (split on `\n` only; a last line without one counts).
func splitLines(_ bytes: [UInt8]) -> [[UInt8]] {
    var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map(Array.init)
    if lines.last?.isEmpty == true { lines.removeLast() }
    return lines
}
