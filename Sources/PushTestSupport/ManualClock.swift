import PushCore
import Synchronization

/// A service clock that moves only when a test advances it: a two-hour retry window or a
/// 15-second sweep interval is driven in microseconds, deterministically. It is the service's
/// one clock in tests: what time it is (``now``, milliseconds since the epoch) and what every
/// timer sleeps on.
///
/// Sleepers whose deadline is reached are resumed by ``advance(by:)`` before it returns, so
/// ``waitForSleepers(_:)`` can tell when a woken service has finished its work and gone back
/// to sleep.
public final class ManualClock: ServiceClock, Sendable {
    private struct Sleeper {
        let id: UInt64
        /// Time since the epoch.
        let deadline: Duration
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        /// Time since the epoch.
        var now: Duration
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
        /// Ids cancelled before their continuation was registered.
        var cancelled: Set<UInt64> = []
        var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state: Mutex<State>

    /// - Parameter start: the time it shows first, in milliseconds since the epoch (default
    ///   2027-01-15).
    public init(start: Int64 = 1_800_000_000_000) {
        state = Mutex(State(now: .milliseconds(start)))
    }

    public var now: Int64 { state.withLock { $0.now }.wholeMilliseconds }

    /// The time it shows, as a duration since the epoch.
    public var elapsed: Duration { state.withLock { $0.now } }

    public func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        let (id, deadline) = state.withLock { state -> (UInt64, Duration) in
            state.nextID += 1
            return (state.nextID, state.now + duration)
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resume: Result<Void, any Error>? = state.withLock { state in
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    Self.notifyWatchers(&state)
                    return nil
                }
                if let resume { continuation.resume(with: resume) }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                if let index = state.sleepers.firstIndex(where: { $0.id == id }) {
                    return state.sleepers.remove(at: index)
                }
                state.cancelled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward and wakes every sleeper whose deadline is reached.
    public func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now += duration
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken.sorted(by: { $0.deadline < $1.deadline }) { sleeper.continuation.resume() }
    }

    /// Number of tasks sleeping on this clock.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// Returns once at least `count` tasks sleep on this clock.
    public func waitForSleepers(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.sleepers.count >= count { return true }
                state.watchers.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    private static func notifyWatchers(_ state: inout State) {
        let count = state.sleepers.count
        let ready = state.watchers.filter { $0.count <= count }
        state.watchers.removeAll { $0.count <= count }
        for watcher in ready { watcher.continuation.resume() }
    }
}
