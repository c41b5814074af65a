#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one clock of the service: what time it is (notification times, expirations, retry
/// schedules, claims) and what every timer sleeps on (the sweeper, the index follower, the
/// delivery worker's waits, back-offs, leases). The service takes it once and hands it to
/// every part; tests pass a manual clock, so that a two-hour retry window or a 15-second sweep
/// runs in microseconds (`PushTestSupport.ManualClock`).
///
/// Times are milliseconds since the Unix epoch, as the store keeps them.
public protocol ServiceClock: Sendable {
    /// Now, in milliseconds since the Unix epoch.
    var now: Int64 { get }

    /// Suspends for `duration` of this clock's time; throws `CancellationError` when the task
    /// is cancelled first.
    func sleep(for duration: Duration) async throws
}

extension ServiceClock {
    /// Now, in whole seconds since the Unix epoch (subscription expirations, tokens).
    public var nowSeconds: Int64 {
        let milliseconds = now
        return milliseconds >= 0 ? milliseconds / 1_000 : (milliseconds - 999) / 1_000
    }

    /// Sleeps until `deadline` (milliseconds since the epoch); returns at once when it passed.
    public func sleep(until deadline: Int64) async throws {
        let delay = deadline.saturatingSubtracting(now)
        if delay > 0 { try await sleep(for: .milliseconds(delay)) }
    }
}

/// The machine's clock: the real time (`CLOCK_REALTIME`) and real sleeps.
public struct SystemClock: ServiceClock {
    public init() {}

    public var now: Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000 + Int64(time.tv_nsec) / 1_000_000
    }

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}
