import ArgumentParser
import PushService
import PushJSON

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
        do {
            print(try await StoreCommands.migrate(configuration))
        } catch {
            printError("pushdispatch: cannot open the store: \(error)")
            throw ExitCode(1)
        }
    }
}
