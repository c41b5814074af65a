import ArgumentParser
import PushService
import PushJSON

/// `pushdispatch export --config F --output FILE`: the configured store's durable state as
/// NDJSON (``StoreTransfer``), to import into another store. Stop the service first: what it
/// changes during the export may be missed.
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write the store's subscriptions, service keys, trees, checkpoints and waiting notifications to a file.",
        discussion: """
            For moving from SQLite to PostgreSQL (docs/scaling-out.md): stop the service, export, then \
            `pushdispatch import` into the new store. The file holds the service's private signing keys: it is \
            created readable by its owner only; keep it so, and delete it once imported.
            """
    )

    @Option(help: "Configuration file (YAML or JSON) of the store to export.") var config: String
    @Option(help: "The file to write (it must not exist).") var output: String

    func run() async throws {
        let configuration = try loadConfiguration(config, purpose: .replay)
        do {
            let counts = try await StoreCommands.export(configuration, to: output)
            printError("exported \(counts.summary) to \(output)")
        } catch let error as TransferError where error.kind == .file {
            printError("pushdispatch: \(error)")
            throw ExitCode(1)
        } catch {
            printError("pushdispatch: export failed: \(error)")
            throw ExitCode(1)
        }
    }
}

/// `pushdispatch import --config F --input FILE`: loads an export into the configured
/// PostgreSQL store, in one transaction, refusing a database that holds data already.
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Load a `pushdispatch export` file into the configured (fresh) PostgreSQL store.",
        discussion: """
            All of it or nothing, in one transaction. Subscriptions keep their ids and handles; the sources' \
            checkpoints are filed under this configuration's instance.name (give the instance that will read \
            the same queue file the same name).
            """
    )

    @Option(help: "Configuration file (YAML or JSON) of the PostgreSQL store to fill.") var config: String
    @Option(help: "The export file.") var input: String

    func run() async throws {
        let configuration = try loadConfiguration(config, purpose: .replay)
        do {
            let (counts, location) = try await StoreCommands.import(configuration, from: input)
            printError("imported \(counts.summary) into \(location)")
        } catch let error as TransferError where error.kind == .notPostgreSQL {
            printError("pushdispatch: \(error)")
            throw ExitCode(2)
        } catch let error as TransferError where error.kind == .file {
            printError("pushdispatch: \(error)")
            throw ExitCode(1)
        } catch let error as TransferError {
            printError("pushdispatch: \(input): \(error)")
            throw ExitCode(1)
        } catch {
            printError("pushdispatch: import failed, nothing was imported: \(error)")
            throw ExitCode(1)
        }
    }
}
