import PushCore

/// A wake-up signal: `signal()` from anywhere, `wait(upTo:on:)` in one consumer. Signals while
/// nobody waits are kept (one is enough).
public final class Wakeup: Sendable {
    let stream: AsyncStream<Void>
    let continuation: AsyncStream<Void>.Continuation

    public init() {
        (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    public func signal() { continuation.yield() }

    /// Returns at the next signal, or after `timeout` of `clock`'s time, or at cancellation.
    func wait(upTo timeout: Duration, on clock: any ServiceClock) async {
        let stream = self.stream
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in stream { return }
            }
            group.addTask { try? await clock.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }
}
