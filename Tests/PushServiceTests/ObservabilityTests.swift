import AsyncHTTPClient
import PushAPI
import Synchronization
import PushCore
import PushContracts
import PushEngine
@testable import PushService
import PushTestSupport
import Testing

@Suite("Readiness and metric labels")
struct ObservabilityTests {
    @Test("/readyz waits for the sources; a paused sender does not make it fail (issue 33)")
    func readiness() {
        let observability = Observability(sources: ["queue-file", "socket"], clock: ManualClock())
        #expect(observability.readiness() == ["status": "starting", "waitingFor": ["queue-file", "socket"]])
        observability.attached("socket")
        observability.attached("queue-file")
        #expect(observability.readiness() == nil)
    }

    @Test("/readyz says storeFailing while a write is held up or the probe goes unanswered past its deadline, and clears when it works")
    func storeReadiness() {
        let clock = ManualClock()
        let health = StoreHealth(probeDeadline: 2_000, clock: clock)
        let observability = Observability(sources: [], clock: clock, storeHealth: health)
        #expect(observability.readiness() == nil)
        // A commit that fails and is being retried.
        health.failing("committing a batch", reason: "database or disk is full")
        #expect(observability.readiness() == ["status": "storeFailing", "store": ["committing a batch": "database or disk is full"]])
        health.recovered("committing a batch")
        #expect(observability.readiness() == nil)
        // A probe that waits: fine within the deadline, unavailable past it, fine once answered.
        health.probeStarted()
        clock.advance(by: .seconds(2))
        #expect(observability.readiness() == nil)
        clock.advance(by: .seconds(1))
        #expect(observability.readiness() == ["status": "storeFailing", "store": ["probe": "the store has not answered a read for 3 s"]])
        health.probeEnded(failure: nil)
        #expect(observability.readiness() == nil)
        // A probe that fails: unavailable until one succeeds.
        health.probeStarted()
        health.probeEnded(failure: "connection refused")
        health.probeStarted()
        #expect(observability.readiness()?["store"]?["probe"] == "connection refused")
        health.probeEnded(failure: nil)
        #expect(observability.readiness() == nil)
    }
}

@Suite("The operations API's event stream over HTTP", .processLevel)
struct EventStreamTests {
    @Test("an event stream outlives the request deadline (its answer began); a stop ends it")
    func outlivesDeadline() async throws {
        let service = try ServiceHarness(limits: ConnectionLimits(headTimeout: .seconds(30), requestTimeout: .seconds(1), maxHeadBytes: 80 * 1024))
        try await service.start()
        defer { Task { await service.shutdown() } }
        let response = try await service.client.execute(HTTPClientRequest(url: service.base + "/ops/v1/events"), timeout: .seconds(30))
        #expect(response.status.code == 200 && response.headers["content-type"].first == "text/event-stream")
        let ended = Mutex<ContinuousClock.Instant?>(nil)
        let reader = Task {
            do {
                for try await _ in response.body {}
            } catch {}
            ended.withLock { $0 = .now }
        }
        try await Task.sleep(for: .milliseconds(2_500))
        #expect(ended.withLock { $0 } == nil, "the stream was cut before the reader left")
        let stopping = ContinuousClock.now
        await service.stop()
        _ = await reader.value
        #expect(ended.withLock { $0 }.map { $0 - stopping < .seconds(10) } == true)
    }
}
