import PushCore
import PushContracts
import PushEngine
@testable import PushService
import PushTestSupport
import Testing

@Suite("Readiness and metric labels")
struct ObservabilityTests {
    @Test("/readyz waits for the sources, then lists paused applications")
    func readiness() {
        let observability = Observability(sources: ["queue-file", "socket"], clock: ManualClock())
        #expect(observability.readiness(paused: []) == ["status": "starting", "waitingFor": ["queue-file", "socket"]])
        observability.attached("socket")
        observability.attached("queue-file")
        #expect(observability.readiness(paused: []) == nil)
        #expect(observability.readiness(paused: ["a", "b"]) == ["status": "paused", "pausedApplications": ["a", "b"]])
    }

    @Test("/readyz says storeFailing while a write is held up or the probe goes unanswered past its deadline, and clears when it works")
    func storeReadiness() {
        let clock = ManualClock()
        let health = StoreHealth(probeDeadline: 2_000, clock: clock)
        let observability = Observability(sources: [], clock: clock, storeHealth: health)
        #expect(observability.readiness(paused: []) == nil)
        // A commit that fails and is being retried.
        health.failing("committing a batch", reason: "database or disk is full")
        #expect(observability.readiness(paused: ["a"]) == ["status": "storeFailing", "store": ["committing a batch": "database or disk is full"]])
        health.recovered("committing a batch")
        #expect(observability.readiness(paused: []) == nil)
        // A probe that waits: fine within the deadline, unavailable past it, fine once answered.
        health.probeStarted()
        clock.advance(by: .seconds(2))
        #expect(observability.readiness(paused: []) == nil)
        clock.advance(by: .seconds(1))
        #expect(observability.readiness(paused: []) == ["status": "storeFailing", "store": ["probe": "the store has not answered a read for 3 s"]])
        health.probeEnded(failure: nil)
        #expect(observability.readiness(paused: []) == nil)
        // A probe that fails: unavailable until one succeeds.
        health.probeStarted()
        health.probeEnded(failure: "connection refused")
        health.probeStarted()
        #expect(observability.readiness(paused: [])?["store"]?["probe"] == "connection refused")
        health.probeEnded(failure: nil)
        #expect(observability.readiness(paused: []) == nil)
    }
}
