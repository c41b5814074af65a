import PushCore
import Synchronization

/// Until when this instance's delivery claims are surely still its own: a send may start only
/// before then.
///
/// Alone on its store, an instance's claims are its own until it releases them: always. Among
/// several on one PostgreSQL database, the others release the claims of an instance whose
/// heartbeat is older than `SharedInstances.staleAfter` (PushEngine) (an instance cut off, paused, or
/// dead), and send them again. So each heartbeat that reached the database extends the tenure
/// to the time it was sent plus that, less a margin; an instance that cannot reach the database
/// stops starting the sends it had claimed before the others may take them over (it would
/// otherwise send them, out of order, once its store answered again: found by the partition
/// test, docs/decisions.md "A broken network"). The notifications it had not started are
/// released once the store answers; the sends already in flight finish.
public final class ClaimTenure: Sendable {
    /// Milliseconds since the epoch by the service clock; `Int64.max`: for ever.
    private let until: Atomic<Int64>
    /// How long a heartbeat keeps the claims, margin deducted; `nil`: for ever.
    private let tenure: Int64?

    /// Claims surely held for ever (an instance alone on its store).
    public init() {
        until = Atomic(.max)
        tenure = nil
    }

    /// Claims held while heartbeats reach the store within `staleAfter` milliseconds, less
    /// `margin` (scheduling, clocks running at slightly different rates): none before the first.
    public init(staleAfter: Int64, margin: Int64) {
        until = Atomic(.min)
        tenure = max(0, staleAfter.saturatingSubtracting(margin))
    }

    /// A heartbeat sent at `sentAt` (before it was sent) was written.
    public func heartbeat(sentAt: Int64) {
        guard let tenure else { return }
        let end = sentAt.saturatingAdding(tenure)
        // Heartbeats may answer out of order: the tenure only grows.
        var current = until.load(ordering: .relaxed)
        while end > current {
            let (exchanged, original) = until.compareExchange(expected: current, desired: end, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// Whether a send may start at `now`.
    public func holds(at now: Int64) -> Bool { now < until.load(ordering: .relaxed) }

    /// Until when (milliseconds since the epoch; `Int64.max`: for ever).
    public var heldUntil: Int64 { until.load(ordering: .relaxed) }
}
