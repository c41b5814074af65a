import ArgumentParser
import PushService
import PushJSON

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
        let invalid: Int
        do {
            invalid = try await session.replayFile(changes, report: printError)
        } catch let error as LineIOError {
            throw ValidationError(error.description)
        }
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
