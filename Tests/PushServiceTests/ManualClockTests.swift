import PushTestSupport
import Testing

@Suite("The manual clock tests drive time with")
struct ManualClockTests {
    @Test("sleepers wake when the clock reaches their deadline, not before")
    func wakesOnTime() async throws {
        let clock = ManualClock()
        let task = Task { try await clock.sleep(for: .seconds(10)) }
        await clock.waitForSleepers()
        clock.advance(by: .seconds(9))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(1))
        #expect(clock.sleeperCount == 0)
        try await task.value
        #expect(clock.now == 1_800_000_010_000)
    }

    @Test("a sleep whose deadline has passed returns at once; a cancelled sleep throws")
    func pastAndCancelled() async throws {
        let clock = ManualClock()
        clock.advance(by: .seconds(5))
        try await clock.sleep(until: clock.now - 1_000)
        let task = Task { try await clock.sleep(for: .seconds(1)) }
        await clock.waitForSleepers()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.sleeperCount == 0)
    }
}
