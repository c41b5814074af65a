/// How the offline queue (``PushDispatch/offline``) keeps and sends what the app asks while
/// the service cannot be reached.
///
/// By default the queue lives in memory, as Firebase's write queue does unless
/// `isPersistenceEnabled`: operations wait for the network while the app runs. With
/// ``isPersistenceEnabled`` they also survive a restart of the app: they are kept in a file
/// (``FileOperationQueueStore/standard(app:)``, mode 0600) and sent at the next launch.
public struct OfflineQueueConfiguration: Sendable {
    /// Most operations waiting at once (after merging). The one that would go past it is
    /// refused at once with ``PushClientError/Code/queueFull``; nothing already queued is
    /// dropped. Default: 256.
    public var limit: Int
    /// Whether the queue is kept on disk and read again at the next launch. Default: `false`.
    public var isPersistenceEnabled: Bool
    /// Where a persistent queue is kept. Default: ``FileOperationQueueStore/standard(app:)``.
    /// Setting one enables persistence.
    public var store: (any OperationQueueStore)?
    /// The wait after the first failed attempt (no network, the service unavailable). It
    /// doubles with each failure in a row, up to ``maxRetryDelay``, and each wait is drawn at
    /// random between its half and its whole (jitter), so that the devices an outage cut off do
    /// not return all at once. Default: 1 second.
    public var initialRetryDelay: Duration
    /// The longest wait between two attempts. Default: 5 minutes.
    public var maxRetryDelay: Duration

    /// A configuration with the defaults above.
    public init(
        limit: Int = 256, isPersistenceEnabled: Bool = false, store: (any OperationQueueStore)? = nil,
        initialRetryDelay: Duration = .seconds(1), maxRetryDelay: Duration = .seconds(300)
    ) {
        self.limit = limit
        self.isPersistenceEnabled = isPersistenceEnabled || store != nil
        self.store = store
        self.initialRetryDelay = initialRetryDelay
        self.maxRetryDelay = maxRetryDelay
    }

    /// A persistent queue: in `store`, or in the standard file.
    public static func persistent(store: (any OperationQueueStore)? = nil, limit: Int = 256) -> OfflineQueueConfiguration {
        OfflineQueueConfiguration(limit: limit, isPersistenceEnabled: true, store: store)
    }
}

/// The wait before the next attempt after `failures` failures in a row: exponential, capped,
/// jittered. Pure (the random draw is a parameter).
enum RetryDelay {
    /// `initial × 2^(failures−1)`, at most `maximum`, times a factor from 0.5 to 1 drawn from
    /// `random` (0 ≤ random < 1). Zero failures: no wait.
    static func delay(failures: Int, initial: Duration, maximum: Duration, random: Double) -> Duration {
        guard failures > 0 else { return .zero }
        let initialSeconds = max(seconds(initial), 0.001)
        let maximumSeconds = max(seconds(maximum), initialSeconds)
        let exponent = Double(min(failures - 1, 62))
        let base = min(initialSeconds * pow2(exponent), maximumSeconds)
        let factor = 0.5 + 0.5 * min(max(random, 0), 1)
        return .milliseconds(Int64((base * factor * 1000).rounded()))
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        let value = Double(seconds) + Double(attoseconds) / 1e18
        return value.isFinite ? min(max(value, 0), 86_400) : 0
    }

    static func pow2(_ exponent: Double) -> Double {
        var result = 1.0
        var left = exponent
        while left > 0 && result < 1e18 {
            result *= 2
            left -= 1
        }
        return result
    }
}
