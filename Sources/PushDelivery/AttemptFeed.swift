import PushContracts
import PushCore
import PushHTTP
import Synchronization

/// Delivery attempts as they are settled, to any number of watchers (the operations API's
/// live stream, SPEC §13.3). A watcher that falls behind loses the oldest attempts it has not
/// read (at most ``bufferLimit`` wait for it), never slows delivery down.
public final class AttemptFeed: Sendable {
    struct Watchers {
        var next = 0
        var continuations: [Int: AsyncStream<DeliveryAttempt>.Continuation] = [:]
        /// The service stops: streams end, new ones end at once.
        var finished = false
    }

    /// Attempts kept for a watcher that has not read them.
    public static let bufferLimit = 1_024
    let watchers = Mutex(Watchers())
    let count = Atomic<Int>(0)

    public init() {}

    /// Whether anybody watches (attempts are built for the feed alone only then).
    public var isWatched: Bool { count.load(ordering: .relaxed) > 0 }

    /// A stream of the attempts settled from now on; it ends when the watcher stops reading
    /// (the stream is dropped) or cancels.
    public func watch() -> AsyncStream<DeliveryAttempt> {
        let (stream, continuation) = AsyncStream.makeStream(of: DeliveryAttempt.self, bufferingPolicy: .bufferingNewest(Self.bufferLimit))
        let id = watchers.withLock { watchers -> Int? in
            guard !watchers.finished else { return nil }
            let id = watchers.next
            watchers.next += 1
            watchers.continuations[id] = continuation
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        count.add(1, ordering: .relaxed)
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            if self.watchers.withLock({ $0.continuations.removeValue(forKey: id) }) != nil { self.count.subtract(1, ordering: .relaxed) }
        }
        return stream
    }

    /// Ends every stream, and those asked for from now on (the service stops: the HTTP server
    /// waits for its responses, an event stream's too).
    public func finish() {
        let continuations = watchers.withLock { watchers in
            watchers.finished = true
            defer { watchers.continuations.removeAll() }
            return Array(watchers.continuations.values)
        }
        count.store(0, ordering: .relaxed)
        for continuation in continuations { continuation.finish() }
    }

    public func publish(_ attempts: [DeliveryAttempt]) {
        guard !attempts.isEmpty, isWatched else { return }
        let continuations = watchers.withLock { Array($0.continuations.values) }
        for continuation in continuations {
            for attempt in attempts { continuation.yield(attempt) }
        }
    }
}

extension StoredNotification {
    /// The number of the attempt being made at it: one more than those made (saturating: the
    /// count comes from the store).
    var attemptNumber: Int { attempts == .max ? .max : attempts + 1 }
}

extension DeliveryAttempt {
    /// The history's record of a dispatcher decision settled at `at`.
    public init(_ decision: DispatchStateMachine.Decision, at: Int64) {
        let notification = decision.notification
        let entry = notification.entry
        self.init(
            notification: notification.id, subscription: entry.subscriptionID, app: entry.app, seq: entry.recordSeq, provider: decision.provider.label,
            destination: Self.destination(of: entry), attempt: notification.attemptNumber, at: at,
            status: decision.status, reason: decision.detail, latencyMs: decision.latency, outcome: decision.historyOutcome, nextAt: decision.nextAt)
    }

    /// A webhook's name, a push service's origin (`https://host[:port]`), `nil` for the others.
    public static func destination(of entry: OutboxEntry) -> String? {
        SenderKey(entry).destination
    }
}
