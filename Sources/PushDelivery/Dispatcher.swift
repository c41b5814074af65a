#if canImport(Glibc)
import Glibc
#endif
import Logging
import PushCore
import ServiceLifecycle
import Synchronization

/// Where each notification goes: the sender of its application and kind (and webhook name).
public protocol SenderDirectory: Sendable {
    func sender(for entry: OutboxEntry) -> (any NotificationSender)?
}

/// Counts of what delivery did, by provider and outcome (SPEC §11.13 labels): kept in memory
/// (for `status` and tests, with per-minute counts of the last quarter hour) and, given a
/// metrics factory, counted as `pushdispatch_deliveries_total{provider,outcome}`,
/// `pushdispatch_retries_total{provider}`, `pushdispatch_revocations_total{reason}` and the
/// `pushdispatch_delivery_latency_seconds{provider}` histogram.
public final class DeliveryCounters: Sendable {
    struct State {
        var outcomes: [String: Int] = [:]
        var retries: [String: Int] = [:]
        var resends: [String: Int] = [:]
        /// Minute (since the epoch) → `provider/outcome` → count.
        var minutes: [Int64: [String: Int]] = [:]
    }

    let state = Mutex(State())
    let metrics: LabelledMetrics
    /// Milliseconds since the epoch (the per-minute counts).
    let now: @Sendable () -> Int64
    static let keptMinutes: Int64 = 15

    public init(metrics: LabelledMetrics = LabelledMetrics(factory: nil), now: @escaping @Sendable () -> Int64 = { currentMilliseconds() }) {
        self.metrics = metrics
        self.now = now
    }

    func count(provider: String, outcome: String) {
        let minute = now() / 60_000
        state.withLock { state in
            state.outcomes["\(provider)/\(outcome)", default: 0] += 1
            state.minutes[minute, default: [:]]["\(provider)/\(outcome)", default: 0] += 1
            if state.minutes.count > Self.keptMinutes + 1 {
                state.minutes = state.minutes.filter { $0.key > minute - Self.keptMinutes }
            }
        }
        metrics.increment("pushdispatch_deliveries_total", [("provider", provider), ("outcome", outcome)])
        if outcome == "revoked" { metrics.increment("pushdispatch_revocations_total", [("reason", RevokeReason.deliveryRejected.rawValue)]) }
    }

    func retried(provider: String) {
        state.withLock { $0.retries[provider, default: 0] += 1 }
        metrics.increment("pushdispatch_retries_total", [("provider", provider)])
    }

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
        let minute = now() / 60_000
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

/// Milliseconds since the epoch.
public func currentMilliseconds() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_REALTIME, &time)
    return Int64(time.tv_sec) * 1_000 + Int64(time.tv_nsec) / 1_000_000
}

/// The delivery worker (SPEC §8): claims due notifications from the outbox (the oldest of each
/// subscription only, so order per subscription holds), sends them concurrently within the
/// per-provider and per-application bounds, and settles the outcomes in batches: delivered,
/// retried on the persisted schedule, discarded after the window, revoked, or released while
/// an application is paused.
public final class Dispatcher: Service, Sendable {
    public struct Configuration: Sendable {
        public var retry: RetryPolicy
        public var perProvider: Int
        public var perApp: Int
        /// Claims are held this long (milliseconds); a crashed holder's claims free up after it.
        public var lease: Int64
        /// This process's name in claims.
        public var claimant: String
        /// At most this many notifications claimed and not settled.
        public var maximumInFlight: Int
        /// How long a paused application waits before it is tried again (milliseconds).
        public var pauseProbe: Int64
        /// Whether to release every claim at start (a single instance on its own store).
        public var releaseAllAtStart: Bool

        public init(
            retry: RetryPolicy = RetryPolicy(), perProvider: Int = 256, perApp: Int = 64, lease: Int64 = 300_000, claimant: String = "local",
            maximumInFlight: Int = 1_024, pauseProbe: Int64 = 30_000, releaseAllAtStart: Bool = true
        ) {
            self.retry = retry
            self.perProvider = max(1, perProvider)
            self.perApp = max(1, perApp)
            self.lease = max(1_000, lease)
            self.claimant = claimant
            self.maximumInFlight = max(1, maximumInFlight)
            self.pauseProbe = max(1, pauseProbe)
            self.releaseAllAtStart = releaseAllAtStart
        }
    }

    /// Why an application's sending stopped.
    public struct Pause: Sendable, Equatable {
        public var reason: String
        public var since: Int64
        public var probeAt: Int64
    }

    struct State {
        var completed: [(StoredNotification, DeliveryOutcome, String)] = []
        var inFlight = 0
        var byProvider: [String: Int] = [:]
        var byApp: [String: Int] = [:]
        /// Claimed, waiting for a provider or application slot.
        var waiting: [StoredNotification] = []
        var paused: [SenderKey: Pause] = [:]
        var slowedUntil: [SenderKey: Int64] = [:]
        var wake = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    let store: any DeliveryStore
    let senders: any SenderDirectory
    let configuration: Configuration
    /// Builds the revoke notification of a subscription the provider refused (its payload in
    /// the subscription's format), or `nil` when it cannot be built.
    let revokeNotice: @Sendable (OutboxEntry) async -> OutboxEntry?
    let now: @Sendable () -> Int64
    let clock: any Clock<Duration>
    let random: @Sendable () -> Double
    let logger: Logger
    public let counters: DeliveryCounters
    let state = Mutex(State())
    /// Called with the subscriptions a settlement deleted (the index follows them).
    let onRevoked: @Sendable ([Int64]) -> Void

    public init(
        store: any DeliveryStore, senders: any SenderDirectory, configuration: Configuration = Configuration(),
        revokeNotice: @escaping @Sendable (OutboxEntry) async -> OutboxEntry?, now: @escaping @Sendable () -> Int64,
        clock: any Clock<Duration> = ContinuousClock(), random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        counters: DeliveryCounters = DeliveryCounters(), logger: Logger, onRevoked: @escaping @Sendable ([Int64]) -> Void = { _ in }
    ) {
        self.store = store
        self.senders = senders
        self.configuration = configuration
        self.revokeNotice = revokeNotice
        self.now = now
        self.clock = clock
        self.random = random
        self.counters = counters
        self.logger = logger
        self.onRevoked = onRevoked
    }

    /// New notifications were committed: look for due work now.
    public func nudge() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.wake = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// The application senders paused now, with why.
    public var paused: [SenderKey: Pause] { state.withLock { $0.paused } }

    /// The applications with a paused sender (readiness lists them).
    public var pausedApplications: [String] { Array(Set(paused.keys.map(\.app))).sorted() }

    public func run() async throws {
        if configuration.releaseAllAtStart {
            try await store.releaseClaims(claimant: nil)
        } else {
            try await store.releaseClaims(claimant: configuration.claimant)
        }
        await withDiscardingTaskGroup { group in
            await withTaskCancellationOrGracefulShutdownHandler {
                await self.loop(group: &group)
            } onCancelOrGracefulShutdown: {
                self.nudge()
            }
            // Shutting down: what is still being sent gets its answer (each has a deadline),
            // then everything is settled; what was claimed and not started is released.
            while self.state.withLock({ $0.inFlight - $0.waiting.count - $0.completed.count > 0 }) {
                await self.waitForWake(until: nil)
            }
            await self.settleCompleted()
            let unsent = self.state.withLock { state -> [StoredNotification] in
                defer { state.waiting.removeAll() }
                return state.waiting
            }
            if !unsent.isEmpty {
                _ = try? await self.store.settle(unsent.map { .release(id: $0.id) }, claimant: self.configuration.claimant, now: self.now())
            }
        }
    }

    var stopping: Bool { Task.isCancelled || Task.isShuttingDownGracefully }

    func loop(group: inout DiscardingTaskGroup) async {
        var failures = 0
        while !stopping {
            await settleCompleted()
            startWaiting(group: &group)
            let now = self.now()
            let (excluded, free, resumeAt) = state.withLock { state -> (Set<SenderKey>, Int, Int64?) in
                var excluded = Set<SenderKey>()
                var resumeAt: Int64?
                for (key, pause) in state.paused {
                    if pause.probeAt > now {
                        excluded.insert(key)
                        resumeAt = min(resumeAt ?? .max, pause.probeAt)
                    }
                }
                for (key, until) in state.slowedUntil {
                    if until > now {
                        excluded.insert(key)
                        resumeAt = min(resumeAt ?? .max, until)
                    } else {
                        state.slowedUntil[key] = nil
                    }
                }
                return (excluded, configuration.maximumInFlight - state.inFlight, resumeAt)
            }
            var claimed: [StoredNotification] = []
            var nextDue: Int64?
            do {
                if free > 0 {
                    claimed = try await store.claim(
                        now: now, limit: min(free, 512), claimant: configuration.claimant, leaseUntil: now.saturatingAdding(configuration.lease),
                        excluding: excluded)
                }
                // Only when nothing more is due now: the next due time, to sleep until. (With
                // every slot taken, a finished send wakes the loop; no need to look.)
                if free > 0 && claimed.count < min(free, 512) {
                    nextDue = try await store.nextDue(excluding: excluded)
                }
                failures = 0
            } catch {
                if Task.isCancelled { break }  // stopping: the query was cut short, nothing failed
                failures += 1
                logger.error("the outbox cannot be read", metadata: ["error": "\(error)"])
                await waitForWake(until: now.saturatingAdding(Int64(min(30_000, 100 << min(failures, 8)))))
                continue
            }
            if !claimed.isEmpty {
                state.withLock { state in
                    state.inFlight += claimed.count
                    state.waiting += claimed
                }
                startWaiting(group: &group)
                if claimed.count == min(free, 512) { continue }
            }
            var wakeAt = resumeAt
            if let nextDue { wakeAt = min(wakeAt ?? .max, max(nextDue, now + 1)) }
            if free <= 0 { wakeAt = nil }
            await waitForWake(until: wakeAt)
        }
    }

    /// Starts the claimed notifications that have a free provider and application slot.
    func startWaiting(group: inout DiscardingTaskGroup) {
        let ready = state.withLock { state -> [(StoredNotification, any NotificationSender)] in
            var ready: [(StoredNotification, any NotificationSender)] = []
            var kept: [StoredNotification] = []
            for notification in state.waiting {
                let app = notification.entry.app
                guard let sender = senders.sender(for: notification.entry) else {
                    // The application has no such provider (any more): the notification waits on
                    // the retry schedule for the configuration to be fixed.
                    let reason = "no \(notification.entry.kind.rawValue) provider is configured for \(app)"
                    state.completed.append((notification, .retry(reason: reason, retryAfter: nil, slowDown: false), "none"))
                    state.wake = true
                    continue
                }
                if state.byProvider[sender.provider, default: 0] < configuration.perProvider, state.byApp[app, default: 0] < configuration.perApp {
                    state.byProvider[sender.provider, default: 0] += 1
                    state.byApp[app, default: 0] += 1
                    ready.append((notification, sender))
                } else {
                    kept.append(notification)
                }
            }
            state.waiting = kept
            return ready
        }
        for (notification, sender) in ready {
            group.addTask {
                let outcome = await sender.send(notification, now: self.now())
                self.complete(notification, outcome, provider: sender.provider)
            }
        }
    }

    /// No notification claimed, in flight or waiting for its settlement.
    var isIdle: Bool { state.withLock { $0.inFlight == 0 && $0.completed.isEmpty } }

    func complete(_ notification: StoredNotification, _ outcome: DeliveryOutcome, provider: String) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.completed.append((notification, outcome, provider))
            state.byProvider[provider, default: 1] -= 1
            state.byApp[notification.entry.app, default: 1] -= 1
            state.wake = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Waits until nudged, a send completes, or `until` (milliseconds since the epoch).
    func waitForWake(until: Int64?) async {
        let timer: Task<Void, Never>? = until.map { until in
            let delay = max(0, until - now())
            return Task {
                try? await clock.sleep(for: .milliseconds(delay))
                if !Task.isCancelled { nudge() }
            }
        }
        defer { timer?.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resume = state.withLock { state -> Bool in
                if state.wake {
                    state.wake = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if resume { continuation.resume() }
        }
        state.withLock { $0.wake = false }
    }

    /// Turns the outcomes of finished sends into settlements and commits them in one batch.
    func settleCompleted() async {
        let completed = state.withLock { state -> [(StoredNotification, DeliveryOutcome, String)] in
            defer { state.completed.removeAll(keepingCapacity: true) }
            return state.completed
        }
        guard !completed.isEmpty else { return }
        let now = self.now()
        var settlements: [Settlement] = []
        settlements.reserveCapacity(completed.count)
        for (notification, outcome, provider) in completed {
            settlements.append(await settlement(notification, outcome, provider: provider, now: now))
        }
        var attempt = 0
        while true {
            do {
                let result = try await store.settle(settlements, claimant: configuration.claimant, now: now)
                if result.discarded > 0 { logger.warning("notifications discarded after the retry window", metadata: ["count": "\(result.discarded)"]) }
                if result.lost > 0 { logger.warning("claims lost before their settlement", metadata: ["count": "\(result.lost)"]) }
                if !result.revoked.isEmpty { onRevoked(result.revoked) }
                break
            } catch {
                attempt += 1
                logger.error("delivery results cannot be stored; retrying", metadata: ["error": "\(error)", "attempt": "\(attempt)"])
                if attempt >= 5 || stopping {
                    // The claims lapse; the notifications will be sent again (duplicates only).
                    break
                }
                try? await clock.sleep(for: .milliseconds(100 << attempt))
            }
        }
        state.withLock { $0.inFlight -= completed.count }
    }

    func settlement(_ notification: StoredNotification, _ outcome: DeliveryOutcome, provider: String, now: Int64) async -> Settlement {
        let entry = notification.entry
        let key = SenderKey(app: entry.app, kind: entry.kind)
        let metadata: Logger.Metadata = [
            "app": "\(entry.app)", "subscription": "\(entry.subscriptionID)", "provider": "\(provider)", "outcome": "\(outcome.reason)",
        ]
        switch outcome {
        case .delivered, .revoke, .revokeDeadToken, .failed: counters.answered(provider: provider, committedAt: notification.createdAt, at: now)
        default: break
        }
        switch outcome {
        case .delivered:
            resumeIfPaused(key)
            counters.count(provider: provider, outcome: "delivered")
            logger.debug("delivered", metadata: metadata)
            return .delivered(id: notification.id)
        case .retry(_, let retryAfter, let slowDown):
            resumeIfPaused(key)
            let attempts = notification.attempts == .max ? .max : notification.attempts + 1
            let first = notification.firstAttemptAt ?? now
            guard let next = configuration.retry.nextAttempt(now: now, firstAttempt: first, attempts: attempts, retryAfter: retryAfter, random: random())
            else {
                counters.count(provider: provider, outcome: "discarded")
                logger.warning("retry window over: the subscription's waiting notifications are discarded", metadata: metadata)
                return .discard(id: notification.id, subscriptionHandle: entry.subscriptionHandle)
            }
            counters.count(provider: provider, outcome: "retry")
            counters.retried(provider: provider)
            if slowDown {
                state.withLock { state in state.slowedUntil[key] = max(state.slowedUntil[key] ?? 0, next) }
                logger.warning("provider asks to slow down: the application's sending waits", metadata: metadata)
            } else {
                logger.info("delivery will be retried", metadata: metadata.merging(["at": "\(next)"]) { $1 })
            }
            return .retry(id: notification.id, nextAttemptAt: next, firstAttemptAt: first, attempts: attempts)
        case .revokeDeadToken, .revoke:
            resumeIfPaused(key)
            counters.count(provider: provider, outcome: "revoked")
            logger.warning("the provider refused the subscription: revoked (delivery_rejected)", metadata: metadata)
            var notice: OutboxEntry?
            let deadToken: Bool = if case .revokeDeadToken = outcome { true } else { false }
            if entry.notification != .revoke && (!deadToken || entry.kind == .webhook) {
                notice = await revokeNotice(entry)
            }
            return .revoke(id: notification.id, subscriptionHandle: entry.subscriptionHandle, notification: notice)
        case .pause(let reason), .refreshCredentials(let reason):
            let probeAt = now.saturatingAdding(configuration.pauseProbe)
            let newly = state.withLock { state -> Bool in
                let newly = state.paused[key] == nil
                state.paused[key] = Pause(reason: reason, since: state.paused[key]?.since ?? now, probeAt: probeAt)
                return newly
            }
            counters.count(provider: provider, outcome: "retry")
            if newly {
                logger.error("application sender paused: its credentials or configuration are refused; no subscription is revoked", metadata: metadata)
            }
            return .release(id: notification.id)
        case .failed:
            resumeIfPaused(key)
            counters.count(provider: provider, outcome: "failed")
            logger.error("the provider refused a payload the service built (a defect): the notification is dropped", metadata: metadata)
            return .drop(id: notification.id)
        }
    }

    /// A paused sender whose send worked again is resumed.
    func resumeIfPaused(_ key: SenderKey) {
        let resumed = state.withLock { $0.paused.removeValue(forKey: key) != nil }
        if resumed { logger.notice("application sender resumed: its credentials work again", metadata: ["sender": "\(key)"]) }
    }
}
