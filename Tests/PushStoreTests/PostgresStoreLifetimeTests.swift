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
    /// Keeps the messages of warnings and worse.
    final class Warnings: Sendable {
        let messages = Mutex<[String]>([])

        var logger: Logger {
            Logger(label: "lifetime-test") { _ in Handler(warnings: self) }
        }

        struct Handler: LogHandler {
            let warnings: Warnings
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .trace

            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }

            func log(event: LogEvent) {
                if event.level >= .warning { warnings.messages.withLock { $0.append("\(event.message)") } }
            }
        }
    }

    @Test("opened, the store's first queries find the client running (no warning); closed, queries fail")
    func runsWhileOpen() async throws {
        let url = try PostgresTestServer.shared.get().createDatabase()
        let warnings = Warnings()
        for _ in 0..<5 {
            let store = try await PostgresStore.open(url: url, logger: warnings.logger)
            #expect(try await store.countByKind().isEmpty)
            store.close()
            await #expect(throws: (any Error).self) {
                _ = try await store.client.query("SELECT 1", logger: warnings.logger).collect()
            }
        }
        let early = warnings.messages.withLock { $0 }.filter { $0.contains("run()") }
        #expect(early.isEmpty, "\(early)")
    }
}
