import PushCore
import Synchronization

/// Wakes one waiting task early: the application owner, when records reach the inbox or the
/// leases change. A signal given while nobody waits is kept for the next wait (one at most).
///
/// One task waits at a time. (It was an `AsyncStream` iterated by each wait in a child task
/// cancelled at the timeout; cancelling a stream's consumer finishes the stream, so after the
/// first timeout every wait returned at once: an idle instance on PostgreSQL polled its inbox
/// some 800 times a second on most of a core.)
public final class Wakeup: Sendable {
    struct State {
        /// A signal given while nobody waited.
        var signalled = false
        /// The wait under way timed out or was cancelled before it parked.
        var released = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    let state = Mutex(State())

    public init() {}

    public func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.signalled = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns at the next signal (or at once for one given since the last wait), or after
    /// `timeout` of `clock`'s time, or at cancellation.
    func wait(upTo timeout: Duration, on clock: any ServiceClock) async {
        state.withLock { $0.released = false }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.parked() }
            group.addTask {
                try? await clock.sleep(for: timeout)
                self.release()
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Waits for a signal or a release.
    func parked() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.signalled || state.released {
                        state.signalled = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            release()
        }
    }

    /// Ends the wait under way without a signal (its timeout, its cancellation).
    func release() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.released = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }
}
