import ArgumentParser
import Foundation
import Logging
import PushService
import PushStore

#if canImport(Glibc)
import Glibc
#endif

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
        let descriptor = open(output, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            printError("pushdispatch: cannot create \(output): \(String(cString: strerror(errno)))\(errno == EEXIST ? " (it exists; export to a new file)" : "")")
            throw ExitCode(1)
        }
        var buffer = OutputBuffer(descriptor: descriptor)
        defer { close(descriptor) }
        var logger = Logger(label: "pushdispatch")
        logger.logLevel = .warning
        do {
            let store = try await ServiceRuntime.openStore(configuration, logger: logger)
            defer { (store as? PostgresStore)?.close() }
            let counts = try await StoreTransfer.export(store) { line in
                buffer.bytes += line
                buffer.bytes.append(UInt8(ascii: "\n"))
                if buffer.bytes.count > 1 << 20 { try buffer.flush() }
            }
            try buffer.flush()
            guard fsync(descriptor) == 0 else { throw TransferError("cannot sync \(output): \(String(cString: strerror(errno)))") }
            printError("exported \(counts.summary) to \(output)")
        } catch {
            unlink(output)
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
        guard case .postgres = configuration.store else {
            printError("pushdispatch: import fills a PostgreSQL store; \(config) configures store.sqlite")
            throw ExitCode(2)
        }
        let bytes = try readFile(input, what: "the export")
        let contents: StoreContents
        let counts: StoreTransfer.Counts
        do {
            (contents, counts) = try StoreTransfer.parse(bytes, instance: configuration.instanceName)
        } catch {
            printError("pushdispatch: \(input): \(error)")
            throw ExitCode(1)
        }
        var logger = Logger(label: "pushdispatch")
        logger.logLevel = .warning
        do {
            guard let store = try await ServiceRuntime.openStore(configuration, logger: logger) as? PostgresStore else { return }
            defer { store.close() }
            try await store.importContents(contents)
            printError("imported \(counts.summary) into \(store.location)")
        } catch {
            printError("pushdispatch: import failed, nothing was imported: \(error)")
            throw ExitCode(1)
        }
    }
}
