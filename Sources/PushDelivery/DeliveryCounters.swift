import PushCore
import Synchronization

/// Counts of what delivery did, by provider and outcome (SPEC §11.13 labels): kept in memory
/// (for `status` and tests, with per-minute counts of the last quarter hour) and, given a
/// metrics factory, counted as `pushdispatch_deliveries_total{provider,outcome}`,
/// `pushdispatch_retries_total{provider}`, `pushdispatch_revocations_total{reason}` and the
/// `pushdispatch_delivery_latency_seconds{provider}` histogram.
public final class DeliveryCounters: Sendable {
    struct State {
        var outcomes: [String: Int] = [:]
        var retries: [String: Int] = [:]
        var paced: [String: Int] = [:]
        var resends: [String: Int] = [:]
        /// Minute (since the epoch) → `provider/outcome` → count.
        var minutes: [Int64: [String: Int]] = [:]
    }

    let state = Mutex(State())
    let metrics: any MetricsRecorder
    /// What the per-minute counts are dated by.
    let clock: any ServiceClock
    static let keptMinutes: Int64 = 15

    public init(metrics: any MetricsRecorder = NoMetrics(), clock: any ServiceClock = SystemClock()) {
        self.metrics = metrics
        self.clock = clock
    }

    func count(provider: String, outcome: String, times: Int = 1) {
        let minute = clock.now / 60_000
        state.withLock { state in
            state.outcomes["\(provider)/\(outcome)", default: 0] += times
            state.minutes[minute, default: [:]]["\(provider)/\(outcome)", default: 0] += times
            if state.minutes.count > Self.keptMinutes + 1 {
                state.minutes = state.minutes.filter { $0.key > minute - Self.keptMinutes }
            }
        }
        metrics.increment("pushdispatch_deliveries_total", [("provider", provider), ("outcome", outcome)], by: times)
        if outcome == "revoked" { metrics.increment("pushdispatch_revocations_total", [("reason", RevokeReason.deliveryRejected.rawValue)], by: times) }
    }

    func retried(provider: String) {
        state.withLock { $0.retries[provider, default: 0] += 1 }
        metrics.increment("pushdispatch_retries_total", [("provider", provider)])
    }

    /// A quota answer (429) to a paced sender: `pushdispatch_pacing_refusals_total{provider}`.
    func paced(provider: String) {
        state.withLock { $0.paced[provider, default: 0] += 1 }
        metrics.increment("pushdispatch_pacing_refusals_total", [("provider", provider)])
    }

    /// Sends of `provider` that waited for their sender's budget (each once): the requests
    /// pacing kept from going beyond it, `pushdispatch_pacing_waits_total{provider}`.
    func waitedForBudget(provider: String, _ count: Int) {
        metrics.increment("pushdispatch_pacing_waits_total", [("provider", provider)], by: count)
    }

    /// Quota answers (429) to `provider`'s paced senders.
    public func pacingRefusals(provider: String) -> Int { state.withLock { $0.paced[provider] ?? 0 } }

    /// A provider's answer to a notification committed at `committedAt` (milliseconds).
    func answered(provider: String, committedAt: Int64, at: Int64) {
        metrics.record("pushdispatch_delivery_latency_seconds", [("provider", provider)], milliseconds: at.saturatingSubtracting(committedAt))
    }

    /// Deliveries of `provider` that ended with `outcome` (`delivered`, `retry`, `revoked`,
    /// `discarded`, `failed`).
    public func deliveries(provider: String, outcome: String) -> Int {
        state.withLock { $0.outcomes["\(provider)/\(outcome)"] ?? 0 }
    }

    public func retries(provider: String) -> Int { state.withLock { $0.retries[provider] ?? 0 } }

    func resent(provider: String) {
        state.withLock { $0.resends[provider, default: 0] += 1 }
    }

    /// Requests of `provider` lost in transit (reset, GOAWAY) and resent at once.
    public func resends(provider: String) -> Int { state.withLock { $0.resends[provider] ?? 0 } }

    /// Every count, keyed `provider/outcome`.
    public var all: [String: Int] { state.withLock { $0.outcomes } }

    /// Counts keyed `provider/outcome` over the last `minutes` minutes (at most 15), this one
    /// included.
    public func recent(minutes: Int) -> [String: Int] {
        let minute = clock.now / 60_000
        let from = minute - Int64(max(1, min(minutes, Int(Self.keptMinutes)))) + 1
        return state.withLock { state in
            var sums: [String: Int] = [:]
            for (at, counts) in state.minutes where at >= from {
                for (key, count) in counts { sums[key, default: 0] += count }
            }
            return sums
        }
    }
}
