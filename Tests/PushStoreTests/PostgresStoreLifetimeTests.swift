import Logging
@testable import PushStore
import PushTestSupport
import Synchronization
import Testing

/// The store runs its PostgreSQL client's background work for exactly as long as it is open:
/// running before the first query (postgres-nio logs a warning for a connection leased before
/// `run()`), stopped by `close()`.
@Suite("PostgreSQL: the client's lifetime is the store's", .processLevel, .enabled(if: PostgresTestServer.enabled))
struct PostgresStoreLifetimeTests {
    /// Every event a handler got, with its level.
    final class Events: Sendable {
        let all = Mutex<[(Logger.Level, String)]>([])

        var logger: Logger {
            Logger(label: "lifetime-test") { _ in Handler(events: self) }
        }

        /// The messages of warnings and worse.
        var warnings: [String] { all.withLock { $0.filter { $0.0 >= .warning }.map(\.1) } }

        struct Handler: LogHandler {
            let events: Events
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .trace

            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }

            func log(event: LogEvent) { events.all.withLock { $0.append((event.level, "\(event.message)")) } }
        }
    }

    @Test("the client's logger: postgres-nio's early-lease warning (a relaxed flag read before the runner set it) at debug, or dropped above debug; any other warning as it is")
    func earlyLeaseDemoted() {
        let events = Events()
        var logger = events.logger
        let background = PostgresStore.backgroundLogger(logger)
        background.warning("Trying to lease connection from `PostgresClient`, but `PostgresClient.run()` hasn't been called yet.")
        background.warning("Connection closed")
        background.error("Trying to lease connection from `PostgresClient`, but `PostgresClient.run()` hasn't been called yet.")
        #expect(events.all.withLock { $0.map(\.0) } == [.debug, .warning, .error])
        logger.logLevel = .info
        let quieter = PostgresStore.backgroundLogger(logger)
        quieter.warning("Trying to lease connection from `PostgresClient`, but `PostgresClient.run()` hasn't been called yet.")
        #expect(events.all.withLock { $0.count } == 3, "dropped: below the logger's level once demoted")
    }

    @Test("opened, the store's first queries work and log no warning; closed, queries fail")
    func runsWhileOpen() async throws {
        let url = try PostgresTestServer.shared.get().createDatabase()
        let warnings = Events()
        for _ in 0..<5 {
            let store = try await PostgresStore.open(url: url, logger: warnings.logger)
            #expect(try await store.countByKind().isEmpty)
            store.close()
            await #expect(throws: (any Error).self) {
                _ = try await store.client.query("SELECT 1", logger: warnings.logger).collect()
            }
        }
        #expect(warnings.warnings.isEmpty, "\(warnings.warnings)")
    }
}
