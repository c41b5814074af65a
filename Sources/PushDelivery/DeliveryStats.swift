import PushCore
import Synchronization

/// What the operations overview shows per application and provider (SPEC §13.3): attempts per
/// second over the last 1 and 5 minutes, the success ratio, p50 and p99 latency, 429s. Kept in
/// memory by this instance, in one bucket per second for five minutes: a fixed size whatever
/// the rate.
public final class DeliveryStats: Sendable {
    /// One application's provider (and webhook destination: its own sender).
    public struct Key: Hashable, Sendable, Comparable {
        public var app: String
        public var provider: String
        public var destination: String?

        public static func < (lhs: Key, rhs: Key) -> Bool {
            (lhs.app, lhs.provider, lhs.destination ?? "") < (rhs.app, rhs.provider, rhs.destination ?? "")
        }
    }

    /// Latency buckets: upper bounds in milliseconds, roughly ×1.5 apart, then everything above.
    static let bounds: [Int64] = [1, 2, 3, 5, 8, 12, 18, 27, 40, 60, 90, 135, 200, 300, 450, 700, 1_000, 1_500, 2_300, 3_500, 5_000, 7_500, 11_000, 17_000, 25_000, 40_000, 60_000]

    struct Second {
        var second: Int64 = -1
        var attempts = 0
        var delivered = 0
        var tooMany = 0
        var latency = [Int](repeating: 0, count: DeliveryStats.bounds.count + 1)
    }

    struct Series {
        var seconds = [Second](repeating: Second(), count: DeliveryStats.window)
    }

    /// Seconds kept.
    static let window = 300
    let series = Mutex<[Key: Series]>([:])

    public init() {}

    /// One settled attempt at `now` (milliseconds): whether it was delivered, its HTTP status,
    /// its latency.
    public func record(_ key: Key, now: Int64, delivered: Bool, status: Int?, latency: Int64?) {
        let second = now / 1_000
        let slot = Int(((second % Int64(Self.window)) + Int64(Self.window)) % Int64(Self.window))
        let bucket = latency.map { value in Self.bounds.firstIndex { value <= $0 } ?? Self.bounds.count }
        series.withLock { all in
            // In place: the series is not copied at each attempt.
            Self.add(to: &all[key, default: Series()].seconds[slot], second: second, delivered: delivered, tooMany: status == 429, bucket: bucket)
        }
    }

    static func add(to slot: inout Second, second: Int64, delivered: Bool, tooMany: Bool, bucket: Int?) {
        if slot.second != second { slot = Second(second: second) }
        slot.attempts += 1
        if delivered { slot.delivered += 1 }
        if tooMany { slot.tooMany += 1 }
        if let bucket { slot.latency[bucket] += 1 }
    }

    /// A key's figures at `now`.
    public struct Summary: Sendable, Equatable {
        public var key: Key
        /// Attempts per second over the last minute and the last five.
        public var perSecond1m: Double
        public var perSecond5m: Double
        /// Delivered of the attempts over five minutes (`nil`: none).
        public var successRatio: Double?
        /// Upper bounds of the latency buckets holding the median and the 99th percentile over
        /// five minutes, in milliseconds (`nil`: no answer timed).
        public var p50: Int64?
        public var p99: Int64?
        public var tooManyRequests5m: Int
    }

    public func summaries(now: Int64) -> [Summary] {
        let current = now / 1_000
        return series.withLock { all in
            all.map { key, entry in
                var attempts1 = 0
                var attempts5 = 0
                var delivered = 0
                var tooMany = 0
                var latency = [Int](repeating: 0, count: Self.bounds.count + 1)
                for second in entry.seconds where second.second > current - Int64(Self.window) && second.second <= current {
                    attempts5 += second.attempts
                    if second.second > current - 60 { attempts1 += second.attempts }
                    delivered += second.delivered
                    tooMany += second.tooMany
                    for index in latency.indices { latency[index] += second.latency[index] }
                }
                func percentile(_ fraction: Double) -> Int64? {
                    let total = latency.reduce(0, +)
                    guard total > 0 else { return nil }
                    let rank = Int((Double(total) * fraction).rounded(.up))
                    var seen = 0
                    for (index, count) in latency.enumerated() {
                        seen += count
                        if seen >= max(1, rank) { return index < Self.bounds.count ? Self.bounds[index] : Int64.max }
                    }
                    return nil
                }
                return Summary(
                    key: key, perSecond1m: Double(attempts1) / 60, perSecond5m: Double(attempts5) / 300,
                    successRatio: attempts5 == 0 ? nil : Double(delivered) / Double(attempts5), p50: percentile(0.5), p99: percentile(0.99),
                    tooManyRequests5m: tooMany)
            }.filter { $0.perSecond5m > 0 }.sorted { $0.key < $1.key }
        }
    }
}
