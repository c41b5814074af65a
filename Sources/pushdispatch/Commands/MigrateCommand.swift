import ArgumentParser
import Logging
import PushService
import PushStore

/// `pushdispatch migrate --config F`: brings the configured store's schema up to date and says
/// where it stands. The service also migrates at start (PostgreSQL: under an advisory lock, so
/// that of instances starting together one migrates and the others wait); this command lets an
/// operator do it ahead of a rolling start, or check a database.
struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Create or upgrade the configured store's schema, then print its version.",
        discussion: """
            Safe to run beside running instances: migrations are frozen and versioned, each applied in one \
            transaction, one process at a time. The service migrates at start too.
            """
    )

    @Option(help: "Configuration file (YAML or JSON): its store is migrated.")
    var config: String

    func run() async throws {
        let configuration = try loadConfiguration(config, purpose: .replay)
        var logger = Logger(label: "pushdispatch")
        logger.logLevel = .warning
        let store: any RuntimeStore
        do {
            store = try await ServiceRuntime.openStore(configuration, logger: logger)
        } catch {
            printError("pushdispatch: cannot open the store: \(error)")
            throw ExitCode(1)
        }
        switch store {
        case let postgres as PostgresStore:
            defer { postgres.close() }
            print("PostgreSQL \(postgres.location): schema version \(try await postgres.schemaVersion())")
        case let sqlite as SQLiteStore:
            print("SQLite \(sqlite.location): schema version \(try await sqlite.schemaVersion())")
        default:
            print("\(store.location): up to date")
        }
    }
}
