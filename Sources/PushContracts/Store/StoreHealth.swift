import PushCore
import PushJSON
import Synchronization

/// Whether the store answers, as readiness tells it (`/readyz`, `/status`): what the writers
/// found (a commit that fails and is being retried: the database server gone, the disk full)
/// and what a periodic probe finds (a read that fails, or is not answered within its deadline:
/// a store that cannot be reached does not always fail a query, it may only make it wait).
///
/// Its clock is the real one by default: the store recovers in real time, whatever the
/// service's clock says (tests give it a manual one).
public final class StoreHealth: Sendable {
    struct State {
        /// What is held up (`committing a batch`, `writing the dead-letter file` …) → how
        /// many operations are held up on it, and why the last one failed.
        var failing: [String: (count: Int, reason: String)] = [:]
        /// The probe's last failure, until a probe succeeds.
        var probeFailure: String?
        /// When the probe in progress began (`nil`: none is).
        var probeSince: Int64?
    }

    /// How long a probe may go unanswered before the store counts as unavailable.
    public let probeDeadline: Int64
    /// What its times are read from (the probe paces itself by it too).
    public let clock: any ServiceClock
    private let state = Mutex(State())

    /// - Parameter probeDeadline: milliseconds. Default 2 s.
    public init(probeDeadline: Int64 = 2_000, clock: any ServiceClock = SystemClock()) {
        self.probeDeadline = probeDeadline
        self.clock = clock
    }

    /// One more operation on `what` failed with `reason` and is being retried (once per
    /// operation; ``stillFailing(_:reason:)`` for its later failures). Several operations may be
    /// held up on one `what` at once (each socket connection of a shared instance writes
    /// its own records): `what` is a problem until every one has ended.
    public func failing(_ what: String, reason: String) {
        state.withLock { state in
            let count = state.failing[what]?.count ?? 0
            state.failing[what] = (count + 1, String(reason.prefix(300)))
        }
    }

    /// An operation already held up on `what` failed again.
    public func stillFailing(_ what: String, reason: String) {
        state.withLock { state in
            guard let held = state.failing[what] else { return }
            state.failing[what] = (held.count, String(reason.prefix(300)))
        }
    }

    /// An operation held up on `what` ended: it succeeded, or it was given up (cancelled, its
    /// client gone). Called once for each ``failing(_:reason:)``.
    public func recovered(_ what: String) {
        state.withLock { state in
            guard let held = state.failing[what] else { return }
            if held.count > 1 { state.failing[what] = (held.count - 1, held.reason) } else { state.failing.removeValue(forKey: what) }
        }
    }

    /// A probe begins.
    public func probeStarted() {
        let now = clock.now
        state.withLock { $0.probeSince = now }
    }

    /// The probe ended: answered (`failure` `nil`) or failed.
    public func probeEnded(failure: String?) {
        state.withLock { state in
            state.probeSince = nil
            state.probeFailure = failure.map { String($0.prefix(300)) }
        }
    }

    /// What is wrong now, by part (`probe`, or what the writers are retrying); empty when the
    /// store answers.
    public var problems: [String: String] {
        let now = clock.now
        return state.withLock { state in
            var problems = state.failing.mapValues(\.reason)
            if let failure = state.probeFailure {
                problems["probe"] = failure
            } else if let since = state.probeSince, now.saturatingSubtracting(since) > probeDeadline {
                problems["probe"] = "the store has not answered a read for \(now.saturatingSubtracting(since) / 1_000) s"
            }
            return problems
        }
    }
}
