import ArgumentParser
import PushCore
import PushContracts
import PushJSON
import PushService

/// `pushdispatch checkpoints`: where each source stands (its last accepted `seq`, its position),
/// and `checkpoints reset` to move a watermark a bad record put out of reach (a `seq` near
/// Int64.max refuses every later record of its source).
struct CheckpointsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "checkpoints",
        abstract: "List each source's last accepted seq and position; reset one.",
        subcommands: [List.self, Reset.self],
        defaultSubcommand: List.self
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "Print each source: its key, last accepted seq (the watermark), position and file.")

        @Option(help: "Configuration file (YAML or JSON): its store is read.")
        var config: String

        func run() async throws {
            let configuration = try loadConfiguration(config, purpose: .replay)
            let checkpoints: [SourceCheckpoint]
            do {
                checkpoints = try await StoreCommands.checkpoints(configuration)
            } catch {
                printError("pushdispatch: cannot read the store: \(error)")
                throw ExitCode(1)
            }
            print("SOURCE\tLAST SEQ\tPOSITION\tFILE")
            for checkpoint in checkpoints {
                print("\(checkpoint.source)\t\(checkpoint.lastSeq.map(String.init) ?? "-")\t\(checkpoint.position)\t\(checkpoint.fileIdentity ?? "-")")
            }
        }
    }

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset",
            abstract: "Set a source's last accepted seq (the service must be stopped).",
            discussion: """
                A record with a seq far ahead (near 9223372036854775807) makes every later record of its source \
                "go back" to the dead-letter file. Stop the service (every instance, on PostgreSQL), set the \
                watermark to the last good seq with --seq N, or remove it with --none (the next seq is accepted \
                whatever it is), start again, then resend the dead-lettered records. The position in the queue \
                file is kept.
                """
        )

        @Option(help: "Configuration file (YAML or JSON): its store is changed.")
        var config: String

        @Option(help: "The source, as `checkpoints list` names it (queue-file, socket, node-1/queue-file).")
        var source: String

        @Option(help: "The last accepted seq to set.")
        var seq: Int64?

        @Flag(help: "Remove the watermark: the next record's seq is accepted whatever it is.")
        var none = false

        func validate() throws {
            if (seq == nil) == !none { throw ValidationError("give either --seq N or --none") }
        }

        func run() async throws {
            let configuration = try loadConfiguration(config, purpose: .replay)
            do {
                try await StoreCommands.resetWatermark(configuration, source: source, lastSeq: none ? nil : seq)
            } catch {
                printError("pushdispatch: \(error)")
                throw ExitCode(1)
            }
            print("\(source): last accepted seq \(none ? "none" : String(seq!))")
        }
    }
}
