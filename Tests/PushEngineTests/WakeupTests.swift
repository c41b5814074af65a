import PushCore
@testable import PushEngine
import Testing

/// The application owner's wake-up: a wait ends at a signal or at its timeout, and a timeout
/// does not spoil the waits after it.
@Suite("Wake-up of the application owner")
struct WakeupTests {
    static let clock = SystemClock()

    /// Milliseconds `body` took.
    static func timed(_ body: () async -> Void) async -> Int64 {
        let start = ContinuousClock.now
        await body()
        let elapsed = ContinuousClock.now - start
        return elapsed.components.seconds * 1_000 + elapsed.components.attoseconds / 1_000_000_000_000_000
    }

    @Test("wait after wait times out in full: none returns early (before, every wait after the first timeout returned at once, and an idle owner polled its inbox in a loop)")
    func timeoutsRepeat() async {
        let wakeup = Wakeup()
        for round in 1...4 {
            let took = await Self.timed { await wakeup.wait(upTo: .milliseconds(100), on: Self.clock) }
            #expect(took >= 95, "wait \(round) returned after \(took) ms")
        }
    }

    @Test("a signal ends a wait under way, also after timeouts; one given while nobody waits ends the next wait at once, and only that one")
    func signals() async {
        let wakeup = Wakeup()
        await wakeup.wait(upTo: .milliseconds(20), on: Self.clock)
        let signaller = Task {
            try? await Task.sleep(for: .milliseconds(50))
            wakeup.signal()
        }
        let woken = await Self.timed { await wakeup.wait(upTo: .seconds(30), on: Self.clock) }
        await signaller.value
        #expect(woken >= 45 && woken < 20_000, "woken after \(woken) ms")

        wakeup.signal()
        wakeup.signal()
        let kept = await Self.timed { await wakeup.wait(upTo: .seconds(30), on: Self.clock) }
        #expect(kept < 20_000, "the signal kept ended the wait after \(kept) ms")
        let next = await Self.timed { await wakeup.wait(upTo: .milliseconds(100), on: Self.clock) }
        #expect(next >= 95, "the wait after it returned after \(next) ms")
    }

    @Test("a cancelled wait returns")
    func cancelled() async {
        let wakeup = Wakeup()
        let waiting = Task { await wakeup.wait(upTo: .seconds(60), on: Self.clock) }
        try? await Task.sleep(for: .milliseconds(30))
        waiting.cancel()
        let took = await Self.timed { await waiting.value }
        #expect(took < 20_000)
    }
}
