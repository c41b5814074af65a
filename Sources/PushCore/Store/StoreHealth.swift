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
        /// What is held up (`committing a batch`, `writing the dead-letter file` …) → why.
        var failing: [String: String] = [:]
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

    /// `what` failed with `reason` and is being retried.
    public func failing(_ what: String, reason: String) {
        state.withLock { $0.failing[what] = String(reason.prefix(300)) }
    }

    /// `what` succeeded (again).
    public func recovered(_ what: String) {
        _ = state.withLock { $0.failing.removeValue(forKey: what) }
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
            var problems = state.failing
            if let failure = state.probeFailure {
                problems["probe"] = failure
            } else if let since = state.probeSince, now.saturatingSubtracting(since) > probeDeadline {
                problems["probe"] = "the store has not answered a read for \(now.saturatingSubtracting(since) / 1_000) s"
            }
            return problems
        }
    }
}
