import Foundation
import PushCore

/// How fast one sender may send: its budget, and how it adapts to the provider's quota answers.
public struct PacingPolicy: Sendable, Equatable {
    /// Sends per second at most: the configured budget (this instance's share of it).
    public var perSecond: Double
    /// Sends allowed back to back after an idle spell (the bucket's depth): small, so that a
    /// burst is spread over time instead of sent at once and then waited for.
    public var burst: Double
    /// A quota answer's `Retry-After` is honoured within these bounds (milliseconds); without
    /// one, the lower bound.
    public var retryAfterMinimum: Int64
    public var retryAfterMaximum: Int64

    public init(perSecond: Double, burst: Double? = nil, retryAfterMinimum: Int64 = 1_000, retryAfterMaximum: Int64 = 60_000) {
        self.perSecond = min(Self.ceiling, max(Self.floor, perSecond))
        // A tenth of a second's budget at once, at least one send.
        self.burst = max(1, burst ?? self.perSecond / 10)
        self.retryAfterMinimum = max(0, retryAfterMinimum)
        self.retryAfterMaximum = max(self.retryAfterMinimum, retryAfterMaximum)
    }

    /// The slowest a sender is paced (sends per second): one send a second keeps finding out
    /// whether the quota came back.
    public static let floor = 1.0
    /// The fastest (sends per second): above it, a budget is no budget.
    public static let ceiling = 1_000_000.0
}

/// One sender's pace: a token bucket kept as the time the next send is due (GCRA), and a rate
/// that adapts to the provider's quota answers (issue 34).
///
/// - A send may start when the bucket has a token: `take(now:)`. Tokens come at `rate` per
///   second, at most `burst` saved up.
/// - A quota answer (429) lowers the rate to what the provider accepted in the second before it
///   (less 5 %), once per episode of refusals: the first refusal of an episode sets it, later
///   ones within a second may only raise it towards what was accepted, as answers from before
///   the refusal keep arriving. Nothing accepted in that second holds the sender until the
///   `Retry-After`, within the policy's bounds.
/// - Accepted sends let the rate grow again: by 25 % a second while below 90 % of the rate last
///   accepted when refused, by 1 % a second above it (probing the limit slowly); the limit is
///   forgotten a minute after the last refusal. Never above the budget.
public struct SendPace: Sendable, Equatable {
    public private(set) var policy: PacingPolicy
    /// Sends per second now.
    public private(set) var rate: Double
    /// When the next send is due in the bucket's schedule (milliseconds, fractional).
    var due: Double = 0
    /// Held until then: the provider accepted nothing and asked to wait.
    public private(set) var heldUntil: Int64 = 0
    /// What the provider accepted, per tenth of a second, over the last second.
    var acceptedTenths = [Int](repeating: 0, count: 10)
    var acceptedTenth: Int64 = 0
    /// The current episode of refusals: when it began and the rate before it.
    var episodeStart: Int64?
    var rateBeforeEpisode: Double = 0
    /// The rate the provider accepted when it last refused, and when that was.
    public private(set) var knownLimit: Double?
    var lastRefusal: Int64 = 0
    /// When the rate last grew.
    var grownAt: Int64 = 0
    /// Quota answers received, and sends that waited for a token (counters).
    public private(set) var refusals = 0
    public private(set) var waited = 0

    public init(policy: PacingPolicy) {
        self.policy = policy
        self.rate = policy.perSecond
    }

    /// A new budget (configuration, or this instance's share of it changed): the rate keeps
    /// its adaptation, under the new ceiling.
    public mutating func update(_ policy: PacingPolicy) {
        let ratio = rate / self.policy.perSecond
        self.policy = policy
        rate = min(policy.perSecond, max(PacingPolicy.floor, policy.perSecond * ratio))
    }

    /// Milliseconds between two sends at the current rate.
    var interval: Double { 1_000 / rate }

    /// The burst at the current rate: the policy's, scaled down with the rate (the same time's
    /// worth of sends), at least one.
    var burst: Double { max(1, policy.burst * rate / policy.perSecond) }

    /// How far ahead of the schedule a send may go (milliseconds).
    var tolerance: Double { interval * (burst - 1) }

    /// Takes a token when one is there at `now`.
    public mutating func take(now: Int64) -> Bool {
        guard now >= heldUntil else { return false }
        let time = Double(now)
        let start = max(due, time)
        guard start - tolerance <= time else { return false }
        due = start + interval
        return true
    }

    /// When the next token comes (milliseconds; `now` or earlier when one is there).
    public func nextToken(now: Int64) -> Int64 {
        let at = Int64((due - tolerance).rounded(.up))
        return max(heldUntil, at)
    }

    /// How many sends could start from `now` until `milliseconds` later (claims take no more).
    public func capacity(now: Int64, within milliseconds: Int64) -> Int {
        let start = Double(max(now, heldUntil))
        let end = Double(now) + Double(max(0, milliseconds))
        let firstAt = max(start, due - tolerance)
        guard firstAt <= end else { return 0 }
        // Tokens saved up at the first moment one is there (at most the burst), then one an
        // interval.
        let saved = min(burst, ((firstAt - (due - tolerance)) / interval).rounded(.down) + 1)
        let coming = ((end - firstAt) / interval).rounded(.down)
        return Int(min(1e9, saved + coming))
    }

    /// Counts a waiting send (the metrics' "waited for budget").
    public mutating func countWait() { waited &+= 1 }

    /// The provider accepted a send (any answer but a quota refusal): counted, and the rate
    /// grows back.
    public mutating func accepted(now: Int64) {
        advanceTenths(to: now)
        acceptedTenths[Int(acceptedTenth % 10)] &+= 1
        if knownLimit != nil, now - lastRefusal > 60_000 { knownLimit = nil }
        if episodeStart.map({ now - $0 > 1_000 }) ?? false { episodeStart = nil }
        let elapsed = now - grownAt
        guard elapsed >= 100 else { return }
        grownAt = now
        guard episodeStart == nil, rate < policy.perSecond else { return }
        let slow = knownLimit.map { rate >= 0.9 * $0 } ?? false
        let perSecond = slow ? 1.01 : 1.25
        rate = min(policy.perSecond, rate * pow(perSecond, Double(min(elapsed, 1_000)) / 1_000))
    }

    /// The provider refused a send for its quota (429): the rate comes down to what it accepted
    /// in the last second; returns when the refused notification is tried again (its
    /// `Retry-After` within the policy's bounds).
    public mutating func refused(now: Int64, retryAfter: Int64?) -> Int64 {
        refusals &+= 1
        advanceTenths(to: now)
        let accepted = Double(acceptedTenths.reduce(0, +))
        let estimate = max(PacingPolicy.floor, accepted * 0.95)
        if let start = episodeStart, now - start <= 1_000 {
            // Answers to sends made before the first refusal still arrive: what was accepted
            // may raise the estimate, never above the rate before the episode.
            rate = min(rateBeforeEpisode, max(rate, estimate))
        } else {
            episodeStart = now
            rateBeforeEpisode = rate
            rate = min(rate, estimate)
        }
        knownLimit = max(knownLimit ?? 0, accepted)
        lastRefusal = now
        grownAt = now
        let wait = min(policy.retryAfterMaximum, max(policy.retryAfterMinimum, retryAfter ?? policy.retryAfterMinimum))
        let until = now.saturatingAdding(wait)
        if accepted == 0 {
            // Nothing got through: wait as asked before the next one.
            heldUntil = max(heldUntil, until)
        }
        // The schedule restarts at the new rate.
        due = max(due, Double(now))
        return until
    }

    /// Moves the accepted counts' ring to `now`'s tenth of a second, clearing what is older
    /// than a second.
    mutating func advanceTenths(to now: Int64) {
        let tenth = now / 100
        guard tenth > acceptedTenth else { return }
        let steps = min(10, tenth - acceptedTenth)
        for step in 1...steps {
            acceptedTenths[Int((acceptedTenth + step) % 10)] = 0
        }
        acceptedTenth = tenth
    }
}
