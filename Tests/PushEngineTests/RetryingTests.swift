import Logging
import PushCore
import PushContracts
@testable import PushEngine
import Testing

/// Writes retried while the store is away, and what readiness hears of them.
@Suite("Retried writes and the store's health")
struct RetryingTests {
    struct Down: Error, CustomStringConvertible {
        var description: String { "connection refused" }
    }

    @Test("several operations held up on one part: a problem until the last one ends")
    func counted() {
        let health = StoreHealth()
        health.failing("accepting records", reason: "connection refused")
        health.failing("accepting records", reason: "connection reset")
        health.stillFailing("accepting records", reason: "the server is starting up")
        #expect(health.problems == ["accepting records": "the server is starting up"])
        health.recovered("accepting records")
        #expect(health.problems == ["accepting records": "the server is starting up"])
        health.recovered("accepting records")
        #expect(health.problems.isEmpty)
        // One too many (never failing): nothing to clear, nothing breaks.
        health.recovered("accepting records")
        #expect(health.problems.isEmpty)
    }

    @Test("a retried write whose task is cancelled (its client went away) leaves no problem behind; one that succeeds neither")
    func cancelledWhileFailing() async throws {
        let health = StoreHealth()
        let logger = Logger(label: "retrying-test")
        let attempts = Counter()
        let task = Task {
            try await retryingIngestion("accepting records", health: health, logger: logger) { () async throws -> Int in
                await attempts.add()
                throw Down()
            }
        }
        while await attempts.value < 2 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(health.problems == ["accepting records": "connection refused"])
        task.cancel()
        _ = await task.result
        #expect(health.problems.isEmpty, "\(health.problems)")

        // Fails twice, then succeeds: cleared.
        let failures = Counter()
        let value = try await retryingIngestion("committing a batch", health: health, logger: logger) { () async throws -> Int in
            await failures.add()
            if await failures.value <= 2 { throw Down() }
            return 7
        }
        #expect(value == 7)
        #expect(health.problems.isEmpty)
    }

    actor Counter {
        var value = 0
        func add() { value += 1 }
    }
}
