import PushCore
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
}
