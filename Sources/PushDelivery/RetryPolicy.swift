import PushCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// When a failed delivery is tried again (SPEC §8, §11.8): from `initial`, multiplied by
/// `multiplier` after each attempt, spread uniformly over ±`jitter`, never sooner than the
/// provider's `Retry-After`, and only within `window` of the first attempt.
///
/// All times are milliseconds since the epoch; all arithmetic saturates, so no configured or
/// provider-given number can trap.
public struct RetryPolicy: Sendable, Equatable {
    /// The first delay, in milliseconds.
    public var initial: Int64
    public var multiplier: Double
    /// Relative spread of each delay: 0.2 spreads it uniformly over ±20 %.
    public var jitter: Double
    /// How long after the first attempt retries may still be made, in milliseconds.
    public var window: Int64

    public init(initial: Int64 = 1_000, multiplier: Double = 2, jitter: Double = 0.2, window: Int64 = 7_200_000) {
        self.initial = max(1, initial)
        self.multiplier = multiplier.isFinite ? max(1, multiplier) : 2
        self.jitter = jitter.isFinite ? min(max(0, jitter), 1) : 0
        self.window = max(0, window)
    }

    /// The delay before the next attempt when `attempts` attempts have failed (1 after the
    /// first), before jitter: `initial × multiplier^(attempts−1)`, saturated.
    public func nominalDelay(afterAttempts attempts: Int) -> Int64 {
        let exponent = Double(max(0, attempts - 1))
        let value = Double(initial) * pow(multiplier, exponent)
        return Self.saturated(value)
    }

    /// The delay with jitter applied: `random` is uniform in 0..<1 (0.5 gives the nominal delay).
    public func delay(afterAttempts attempts: Int, random: Double) -> Int64 {
        let nominal = Double(nominalDelay(afterAttempts: attempts))
        let unit = random.isFinite ? min(max(0, random), 1) : 0.5
        let factor = 1 + jitter * (2 * unit - 1)
        return max(0, Self.saturated(nominal * factor))
    }

    /// When to try again, or `nil` when that would fall outside the window (the notification is
    /// then discarded, SPEC §8).
    ///
    /// - Parameters:
    ///   - now: when the failed attempt was answered.
    ///   - firstAttempt: when the notification was first tried.
    ///   - attempts: attempts made so far, the failed one included.
    ///   - retryAfter: the provider's `Retry-After`, as an absolute time, if any.
    ///   - random: uniform in 0..<1.
    public func nextAttempt(now: Int64, firstAttempt: Int64, attempts: Int, retryAfter: Int64?, random: Double) -> Int64? {
        var next = now.saturatingAdding(delay(afterAttempts: attempts, random: random))
        if let retryAfter, retryAfter > next { next = retryAfter }
        guard next <= firstAttempt.saturatingAdding(window) else { return nil }
        return next
    }

    static func saturated(_ value: Double) -> Int64 {
        guard value.isFinite else { return value > 0 ? .max : 0 }
        if value >= 9.2e18 { return .max }
        if value <= 0 { return 0 }
        return Int64(value)
    }
}
