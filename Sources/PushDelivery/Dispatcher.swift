import Logging
import PushContracts
import PushCore
import PushTracing
import ServiceLifecycle
import Synchronization

/// The delivery worker (SPEC §8): claims due notifications from the outbox (the oldest of each
/// subscription only, so order per subscription holds), sends them concurrently within the
/// per-provider and per-application bounds, and settles the outcomes in batches: delivered,
/// retried on the persisted schedule, discarded after the window, revoked, or released while
/// an application is paused.
///
/// Every decision is the ``DispatchStateMachine``'s; this service only carries out its actions
/// (reads and writes of the ``DeliveryStore``, sends, sleeps on the service clock) and counts
/// and logs what it decided.
public final class Dispatcher: Service, OutboxListener, Sendable {
    public struct Configuration: Sendable {
        public var machine: DispatchStateMachine.Configuration
        /// Claims are held this long (milliseconds); a crashed holder's claims free up after it.
        public var lease: Int64
        /// This process's name in claims.
        public var claimant: String
        /// Whether to release every claim at start (a single instance on its own store); else
        /// only this claimant's (one of several instances).
        public var releaseAllAtStart: Bool
        /// Whether every attempt is written into the delivery history (SPEC §13.2).
        public var keepsHistory = false
        /// How many instances share the senders' budgets (set by the lease keeper among several).
        public var share = InstanceShare()
        /// How long answers may wait for the next claim (milliseconds; 0: stored at once). When
        /// nothing else is due, records arriving one by one would cost a transaction each to
        /// store their answers alone; waiting for the next record's claim stores them with it
        /// in one. A batch's worth of answers, something due sooner, or stopping ends the wait.
        public var settleLinger: Int64 = 0

        public init(
            retry: RetryPolicy = RetryPolicy(), perProvider: Int = 256, perApp: Int = 64, perDestination: Int? = nil, lease: Int64 = 300_000,
            claimant: String = "local", maximumInFlight: Int = 1_024, pauseProbe: Int64 = 30_000, releaseAllAtStart: Bool = true
        ) {
            self.machine = .init(
                retry: retry, perProvider: perProvider, perApp: perApp, perDestination: perDestination, maximumInFlight: maximumInFlight, pauseProbe: pauseProbe)
            self.lease = max(1_000, lease)
            self.claimant = claimant
            self.releaseAllAtStart = releaseAllAtStart
        }
    }

    public typealias Pause = DispatchStateMachine.Pause

    struct State {
        var machine: DispatchStateMachine
        var wake = false
        var waiter: CheckedContinuation<Void, Never>?
        /// The deadline of the wait in progress, when it has one (``waitForWake(until:)``).
        var deadline: Int64?
        /// The one timer keeping the waits' deadlines (``keepTime(_:at:)``): when it comes due,
        /// its number, its task.
        var timer: (at: Int64, id: UInt64, task: Task<Void, Never>)?
        var timers: UInt64 = 0
        /// Sleeping before storing answers again (``store(_:)``).
        var retrying = false
        /// The notifications this dispatcher claimed and has not settled.
        var held: Set<Int64> = []
        /// Sends that waited for their sender's budget, by provider, counted in the metrics.
        var countedWaits: [Provider: Int] = [:]
        /// A claim failed: it may have committed with its answer lost (the connection cut after
        /// the commit), holding notifications nobody here knows of until their lease lapses.
        /// The claims this dispatcher does not hold are released before the next claim.
        var reconcile = false
        /// The outbox changed since the last claim began (``outboxChanged()``).
        var outboxChanged = false
    }

    let store: any DeliveryStore
    let senders: any SenderDirectory
    let configuration: Configuration
    let notices: any RevocationNotices
    let index: any SubscriptionIndexFollower
    let clock: any ServiceClock
    let random: @Sendable () -> Double
    let logger: Logger
    /// Until when this instance's claims are surely its own (``ClaimTenure``): no send starts
    /// after it.
    let tenure: ClaimTenure
    public let counters: DeliveryCounters
    /// Each attempt as it is settled, to whoever watches (`GET /ops/v1/events`).
    public let feed: AttemptFeed
    /// Rates, success and latency per application and provider over five minutes (the
    /// operations overview).
    public let stats = DeliveryStats()
    let state: Mutex<State>
    /// Sends started with callbacks alone, without a task (tests).
    let startedWithoutTask = Atomic<Int>(0)
    /// A span per attempt, when tracing is on.
    let traces: Traces?

    /// - Parameters:
    ///   - notices: builds the revoke notification of a subscription a provider refused.
    ///   - index: told when settlements deleted subscriptions.
    ///   - random: uniform in 0..<1, for the retries' jitter.
    ///   - tenure: until when the claims are surely this instance's (several instances: its
    ///     heartbeats); for ever by default (alone on its store).
    public init(
        store: any DeliveryStore, senders: any SenderDirectory, configuration: Configuration = Configuration(), notices: any RevocationNotices,
        index: any SubscriptionIndexFollower, clock: any ServiceClock, random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        counters: DeliveryCounters = DeliveryCounters(), feed: AttemptFeed = AttemptFeed(), tenure: ClaimTenure = ClaimTenure(), traces: Traces? = nil,
        logger: Logger
    ) {
        self.traces = traces
        self.tenure = tenure
        self.feed = feed
        self.store = store
        self.senders = senders
        self.configuration = configuration
        self.notices = notices
        self.index = index
        self.clock = clock
        self.random = random
        self.counters = counters
        self.logger = logger
        self.state = Mutex(State(machine: DispatchStateMachine(configuration: configuration.machine)))
    }

    /// New notifications were committed (or claims released): look for due work now.
    public func outboxChanged() {
        state.withLock { $0.outboxChanged = true }
        nudge()
    }

    /// Wakes the worker if it sleeps.
    public func nudge() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.wake = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// The application senders paused now, with why.
    public var paused: [SenderKey: Pause] { state.withLock { $0.machine.paused } }

    /// The paced senders' paces: budget, rate now, quota answers, sends that waited (issue 34).
    public var paces: [SenderKey: SendPace] { state.withLock { $0.machine.paces } }

    /// Resumes a paused sender at once (an operator fixed what paused it): its notifications
    /// are claimed again now. Whether it was paused.
    public func resume(_ key: SenderKey) -> Bool {
        let resumed = state.withLock { $0.machine.resume(key) }
        if resumed {
            logger.notice("sender resumed by an operator", metadata: ["sender": "\(key)"])
            // What it left waiting is due now: claimed at once, answers waiting or not.
            outboxChanged()
        }
        return resumed
    }

    /// Sends in flight by provider and by application, claimed and not settled, and the limits
    /// (the operations overview).
    public var load: (byProvider: [Provider: Int], byApp: [String: Int], inFlight: Int, limits: DispatchStateMachine.Configuration) {
        state.withLock { state in
            let sending = state.machine.sending
            return (sending.byProvider, sending.byApp, state.machine.inFlight, configuration.machine)
        }
    }

    /// The applications with a paused sender (readiness lists them).
    public var pausedApplications: [String] { state.withLock { $0.machine.pausedApplications } }

    /// No notification claimed, in flight or waiting for its settlement.
    var isIdle: Bool { state.withLock { $0.machine.isIdle } }

    /// Senders slowed down (a 429, a quota), until when (tests).
    var slowedDown: [SenderKey: Int64] { state.withLock { $0.machine.slowedUntil } }

    public func run() async throws {
        try await store.releaseClaims(claimant: configuration.releaseAllAtStart ? nil : configuration.claimant)
        await withDiscardingTaskGroup { group in
            await withTaskCancellationOrGracefulShutdownHandler {
                await self.loop(group: &group)
            } onCancelOrGracefulShutdown: {
                self.nudge()
            }
            // Shutting down: what is still being sent gets its answer (each has a deadline),
            // then everything is settled; what was claimed and not started is released.
            while !self.state.withLock({ $0.machine.nothingSending }) {
                await self.waitForWake(until: nil)
            }
            await self.settleAnswers()
            let unsent = self.state.withLock { $0.machine.unsent() }
            if !unsent.isEmpty {
                _ = try? await self.store.settle(unsent.map { .release(id: $0.id) }, claimant: self.configuration.claimant, now: self.clock.now)
                self.state.withLock {
                    $0.machine.settled(unsent.count)
                    $0.held.subtract(unsent.map(\.id))
                }
            }
            self.state.withLock { state in
                state.timer?.task.cancel()
                state.timer = nil
            }
        }
    }

    var stopping: Bool { Task.isCancelled || Task.isShuttingDownGracefully }

    /// How often (milliseconds) a dispatcher whose claims are not certain looks again.
    static let uncertainPoll: Int64 = 250

    /// The claimed notifications not started yet are given back (their claims released once the
    /// store answers: ``State/reconcile``), as when the tenure ended: another instance may have
    /// taken them over.
    func abandonUnstarted() {
        let unsent = state.withLock { state -> Int in
            let unsent = state.machine.unsent()
            state.machine.settled(unsent.count)
            state.held.subtract(unsent.map(\.id))
            if !unsent.isEmpty { state.reconcile = true }
            return unsent.count
        }
        if unsent > 0 {
            logger.warning("this instance's claims are no longer certain (no heartbeat reached the store): sends not started are given back", metadata: ["count": "\(unsent)"])
        }
    }

    func loop(group: inout DiscardingTaskGroup) async {
        var failures = 0
        var lastStaleSweep = Int64.min
        // When the outbox may hold something due (unknown: at start), and when the last claim
        // said its next due time is.
        var idle = IdleOutbox.unknown
        while !stopping {
            if configuration.settleLinger > 0 {
                await lingerForClaim(idle)
                // Stopping: the answers are stored by the shutdown, which claims nothing more.
                if stopping { break }
            }
            // The answers so far are stored with the next claim, in one round trip where the
            // store can (SQLite: one transaction), or alone when nothing is to be claimed.
            let pending = await pendingSettlements()
            if state.withLock({ $0.reconcile }) {
                let held = state.withLock { $0.held }
                if let released = try? await store.releaseClaims(claimant: configuration.claimant, keeping: held) {
                    state.withLock { $0.reconcile = false }
                    if released > 0 {
                        logger.warning("claims whose answer was lost released: their notifications go out now", metadata: ["count": "\(released)"])
                    }
                }
            }
            if clock.now.saturatingSubtracting(lastStaleSweep) >= 1_000 {
                lastStaleSweep = clock.now
                await discardStale(now: lastStaleSweep)
            }
            let instances = configuration.share.instances
            let waited = state.withLock { state -> [Provider: Int] in
                state.machine.share(among: instances)
                // The sends that began waiting for their budget since the last turn (metrics).
                var fresh: [Provider: Int] = [:]
                for (provider, total) in state.machine.budgetWaits where total > state.countedWaits[provider, default: 0] {
                    fresh[provider] = total - state.countedWaits[provider, default: 0]
                    state.countedWaits[provider] = total
                }
                return fresh
            }
            for (provider, count) in waited { counters.waitedForBudget(provider: provider.label, count) }
            let startAt = clock.now
            let certain = tenure.holds(at: startAt)
            if certain {
                start(state.withLock { $0.machine.startable(now: startAt) }, group: &group)
            } else {
                abandonUnstarted()
            }
            let now = clock.now
            // Claims no longer certain (no heartbeat reached the store lately): nothing new is
            // claimed until one does.
            let claim = certain ? state.withLock { $0.machine.claim(now: now, settling: pending?.decisions.count ?? 0) } : .none
            var claimed: [StoredNotification] = []
            var nextDue: Int64?
            var limit: Int?
            if case .claim(let most, let excluding, let capped) = claim {
                limit = most
                state.withLock { $0.outboxChanged = false }
                idle = .unknown
                let leaseUntil = now.saturatingAdding(configuration.lease)
                let outcome: Result<ClaimedBatch, any Error>
                if let pending {
                    do {
                        let (result, claim) = try await store.settleAndClaimDue(
                            pending.settlements, attempts: historyAttempts(pending), settledAt: pending.now, claimant: configuration.claimant, now: now, limit: most, leaseUntil: leaseUntil,
                            excluding: excluding, capped: capped)
                        settled(pending, result)
                        outcome = claim
                    } catch {
                        // Not stored: stored alone (retried until they are), the claim next time.
                        await store(pending)
                        continue
                    }
                } else {
                    do {
                        outcome = .success(
                            try await store.claimDue(now: now, limit: most, claimant: configuration.claimant, leaseUntil: leaseUntil, excluding: excluding, capped: capped))
                    } catch {
                        outcome = .failure(error)
                    }
                }
                do {
                    // With the claim, when nothing more is due now: the next due time, to sleep
                    // until.
                    let batch = try outcome.get()
                    claimed = batch.notifications
                    state.withLock { $0.held.formUnion(claimed.map(\.id)) }
                    failures = 0
                    switch batch.nextDue {
                    case .notRead:
                        break
                    case .none:
                        idle = .until(nil)
                    case .at(let due):
                        nextDue = due
                        idle = .until(due)
                    case .unknown(let error):
                        // What was claimed is sent even when this read failed (it would otherwise
                        // wait for its lease): look again in a second.
                        if !Task.isCancelled { logger.error("the outbox cannot be read", metadata: ["error": "\(error)"]) }
                        nextDue = now.saturatingAdding(1_000)
                    }
                } catch {
                    if Task.isCancelled { break }  // stopping: the query was cut short, nothing failed
                    state.withLock { $0.reconcile = true }
                    failures += 1
                    logger.error("the outbox cannot be read", metadata: ["error": "\(error)"])
                    await waitForWake(until: now.saturatingAdding(Int64(min(30_000, 100 << min(failures, 8)))))
                    continue
                }
            } else if let pending {
                await store(pending)
            }
            // A claim answered late (the store was cut off meanwhile, and the others may have
            // taken these notifications over): given back, not sent.
            if !claimed.isEmpty, !tenure.holds(at: clock.now) {
                state.withLock { state in
                    state.held.subtract(claimed.map(\.id))
                    state.reconcile = true
                }
                logger.warning("claims answered after this instance's tenure ended: released, not sent", metadata: ["count": "\(claimed.count)"])
                claimed = []
            }
            if !certain || !tenure.holds(at: clock.now) {
                await waitForWake(until: clock.now.saturatingAdding(Self.uncertainPoll))
                continue
            }
            // Each notification's sender is found once, here, and travels with its send.
            let items = claimed.map { DispatchStateMachine.Claimed($0, sender: senders.sender(for: $0.entry)) }
            let (sends, next) = state.withLock { state in
                (state.machine.claimed(items, now: now), state.machine.next(now: now, claimed: claimed.count, limit: limit, nextDue: nextDue))
            }
            start(sends, group: &group)
            if case .sleep(let until) = next { await waitForWake(until: until) }
        }
    }

    /// What the last claim said of the outbox.
    enum IdleOutbox {
        /// It may hold something due now (no claim yet, a full batch, a failed read).
        case unknown
        /// Nothing due before this time (`nil`: nothing waits).
        case until(Int64?)
    }

    /// Keeps the answers so far waiting for the next claim (``Configuration/settleLinger``),
    /// while: the last claim found nothing more due before the wait would end, the outbox has
    /// not changed since, no claimed send waits to start (its turn comes with the loop's),
    /// fewer than a claim's batch of answers wait, and the dispatcher is not stopping. No
    /// answer waiting, nothing to wait for.
    func lingerForClaim(_ idle: IdleOutbox) async {
        guard case .until(let due) = idle else { return }
        let deadline = clock.now.saturatingAdding(configuration.settleLinger)
        if let due, due <= deadline { return }
        let batch = configuration.machine.claimBatch
        while !stopping {
            let (changed, answers, waiting) = state.withLock { ($0.outboxChanged, $0.machine.answerCount, $0.machine.hasWaitingSends) }
            if changed || waiting || answers == 0 || answers >= batch || clock.now >= deadline { return }
            await waitForWake(until: deadline)
        }
    }

    /// Starts sends: with callbacks alone where the sender can (its answer completes the send
    /// on the connection's thread: no task to wake per answer), else each in its own child
    /// task; the answer wakes the loop. Either way the machine counts the send in flight until
    /// it completes, which is what a stop waits for.
    func start(_ sends: [DispatchStateMachine.Send], group: inout DiscardingTaskGroup) {
        let now = clock.now
        for started in sends {
            var timed = started
            timed.startedAt = now
            // Traced: the attempt's span, whose context the request carries (webhooks).
            let span = traces.map { traces in
                let entry = timed.notification.entry
                return traces.startAttempt(
                    app: entry.app, seq: entry.recordSeq, notification: timed.notification.id, subscription: entry.subscriptionID,
                    provider: timed.provider.label, destination: DeliveryAttempt.destination(of: entry),
                    attempt: timed.notification.attemptNumber, carried: entry.kind == .webhook)
            }
            timed.notification.traceparent = span?.traceparent
            let send = timed
            let traces = self.traces
            let finish: @Sendable (DeliveryOutcome) -> Void = { outcome in
                if let traces, let span { traces.endAttempt(span, status: outcome.status, outcome: outcome.metricLabel, reason: outcome.detail) }
                self.complete(send, outcome)
            }
            guard let sender = send.sender else {
                finish(.retry(reason: "the sender is gone", retryAfter: nil, slowDown: false))
                continue
            }
            if sender.start(send.notification, now: now, completion: finish) {
                startedWithoutTask.add(1, ordering: .relaxed)
                continue
            }
            group.addTask {
                finish(await sender.send(send.notification, now: self.clock.now))
            }
        }
    }

    func complete(_ send: DispatchStateMachine.Send, _ outcome: DeliveryOutcome) {
        let now = clock.now
        let latency = send.startedAt.map { max(0, now.saturatingSubtracting($0)) }
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.machine.sent(send, outcome: outcome, latency: latency, at: now)
            state.wake = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Waits until nudged, a send completes, or `until` (milliseconds since the epoch).
    ///
    /// One timer keeps every wait's deadline, and it outlives the wait that armed it: most
    /// waits end early (a record's nudge, a send's answer), and a timer of their own, started
    /// and cancelled each time, cost about three thread wake-ups a wait (docs/decisions.md,
    /// "The dispatcher's wait: one timer"). A wait whose deadline is no earlier than the armed
    /// timer's keeps it; an earlier deadline replaces it (the old one is cancelled: at most one
    /// timer sleeps). A dispatcher going idle (nothing claimed, in flight or to settle) waits
    /// without a deadline and cancels the timer; so does its stop.
    func waitForWake(until: Int64?) async {
        if let until, until <= clock.now {
            state.withLock { $0.wake = false }
            return
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resume = state.withLock { state -> Bool in
                if state.wake {
                    state.wake = false
                    return true
                }
                state.waiter = continuation
                state.deadline = until
                if let until {
                    if let timer = state.timer, timer.at <= until { return false }
                    state.timer?.task.cancel()
                    state.timers &+= 1
                    let id = state.timers
                    state.timer = (until, id, Task { await self.keepTime(id, at: until) })
                } else if state.machine.isIdle, let timer = state.timer {
                    timer.task.cancel()
                    state.timer = nil
                }
                return false
            }
            if resume { continuation.resume() }
        }
        state.withLock {
            $0.wake = false
            $0.deadline = nil
        }
    }

    /// The timer numbered `id`: sleeps until `at`, then ends the wait in progress if that
    /// wait's deadline has come, or sleeps on until that deadline if it is later (the timer was
    /// armed by an earlier wait). With no wait in progress, or no deadline to it, it ends; so it
    /// does when cancelled (replaced, or the dispatcher stopped).
    func keepTime(_ id: UInt64, at first: Int64) async {
        var at = first
        while true {
            try? await clock.sleep(until: at)
            if Task.isCancelled { return }
            let (waiter, later) = state.withLock { state -> (CheckedContinuation<Void, Never>?, Int64?) in
                guard state.timer?.id == id else { return (nil, nil) }
                if state.waiter != nil, let deadline = state.deadline {
                    if deadline > at {
                        state.timer?.at = deadline
                        return (nil, deadline)
                    }
                    state.timer = nil
                    state.wake = true
                    defer { state.waiter = nil }
                    return (state.waiter, nil)
                }
                state.timer = nil
                return (nil, nil)
            }
            guard let later else {
                waiter?.resume()
                return
            }
            at = later
        }
    }

    /// Sleeping until a time: a wait with a deadline, or before storing answers again (tests
    /// move the clock then; the clock's sleepers alone do not say it: the timer outlives the
    /// wait that armed it).
    var asleep: Bool { state.withLock { ($0.waiter != nil && $0.deadline != nil) || $0.retrying } }

    /// When the one timer comes due, if one is armed (tests; its task may not sleep on the
    /// clock yet).
    var armedTimer: Int64? { state.withLock { $0.timer?.at } }

    /// The answers so far, decided and ready to be stored in one batch.
    struct PendingSettlements {
        var now: Int64
        var decisions: [DispatchStateMachine.Decision]
        var settlements: [Settlement]
        /// Into the delivery history, with the settlements (empty when it is off).
        var attempts: [DeliveryAttempt] = []
    }

    /// Settles every answer so far in one batch: the machine's decisions, revoke notifications
    /// built where they are due, counted and logged.
    func settleAnswers() async {
        guard let pending = await pendingSettlements() else { return }
        await store(pending)
    }

    /// The machine's decisions on the answers so far (counted and logged), with the revoke
    /// notifications built where they are due; `nil` when no answer waits.
    func pendingSettlements() async -> PendingSettlements? {
        let now = clock.now
        let random = self.random
        let decisions = state.withLock { $0.machine.decisions(now: now, random: random) }
        guard !decisions.isEmpty else { return nil }
        var settlements: [Settlement] = []
        settlements.reserveCapacity(decisions.count)
        for decision in decisions {
            record(decision, now: now)
            if decision.needsNotice, case .revoke(let id, let handle, _) = decision.settlement {
                settlements.append(.revoke(id: id, subscriptionHandle: handle, notification: await notices.notice(for: decision.notification.entry)))
            } else {
                settlements.append(decision.settlement)
            }
        }
        var pending = PendingSettlements(now: now, decisions: decisions, settlements: settlements)
        if configuration.keepsHistory || feed.isWatched { pending.attempts = decisions.filter(\.attempted).map { DeliveryAttempt($0, at: $0.answeredAt ?? now) } }
        return pending
    }

    /// What the store did with settlements: logged, counted, told to the feed's watchers; the
    /// notifications leave the flight.
    func settled(_ pending: PendingSettlements, _ result: SettleResult) {
        feed.publish(pending.attempts)
        if result.discarded > 0 {
            logger.warning("notifications discarded after the retry window", metadata: ["count": "\(result.discarded)"])
            // Each decision counted its own notification; the ones waiting behind it went
            // with it: count them too.
            for decision in pending.decisions {
                if case .discard(let id, _) = decision.settlement, let count = result.discardedWith[id], count > 1 {
                    counters.count(provider: decision.provider.label, outcome: "discarded", times: count - 1)
                }
            }
        }
        if result.lost > 0 { logger.warning("claims lost before their settlement", metadata: ["count": "\(result.lost)"]) }
        if !result.revoked.isEmpty { index.nudge() }
        state.withLock {
            $0.machine.settled(pending.decisions.count)
            $0.held.subtract(pending.decisions.map(\.notification.id))
        }
    }

    /// The attempts the store writes into the history (none when it is off: those built for the
    /// feed alone are not stored).
    func historyAttempts(_ pending: PendingSettlements) -> [DeliveryAttempt] {
        configuration.keepsHistory ? pending.attempts : []
    }

    /// Stores settlements, retrying until they are.
    func store(_ pending: PendingSettlements) async {
        let decisions = pending.decisions
        let settlements = pending.settlements
        let now = pending.now
        // Until stored: a claim given up would hold its notification (and the subscription's
        // queue behind it) until its lease lapses, minutes away. The store being away, nothing
        // else can be claimed meanwhile either. Only stopping gives up: the claims are then
        // released at the next start (or by the instances that see this one gone).
        var attempt = 0
        while true {
            do {
                settled(pending, try await store.settle(settlements, attempts: historyAttempts(pending), claimant: configuration.claimant, now: now))
                return
            } catch {
                attempt += 1
                if attempt == 1 || attempt % 20 == 0 {
                    logger.error("delivery results cannot be stored; retrying", metadata: ["error": "\(error)", "attempt": "\(attempt)"])
                }
                if stopping {
                    // The claims lapse; the notifications will be sent again (duplicates only).
                    logger.warning("stopping: delivery results not stored; their notifications will be sent again", metadata: ["count": "\(settlements.count)"])
                    break
                }
                // Until a time, not for a duration: a test that moves the clock once `asleep`
                // says so does not lose the move before the sleep begins.
                let until = clock.now.saturatingAdding(Int64(min(2_000, 100 << min(attempt, 5))))
                state.withLock { $0.retrying = true }
                try? await clock.sleep(until: until)
                state.withLock { $0.retrying = false }
            }
        }
        state.withLock {
            $0.machine.settled(decisions.count)
            $0.held.subtract(decisions.map(\.notification.id))
        }
    }

    /// A paused sender's notifications are kept for the retry window counted from their
    /// creation: older ones are discarded (counted as `discarded`), so that the outbox of an
    /// application paused for days holds at most a window of its writes. (Paused, its
    /// notifications are released without an attempt, so the window from the first attempt
    /// would never start.) Run at most every second, and at least at every pause probe.
    func discardStale(now: Int64) async {
        let senders = state.withLock { $0.machine.paused.keys.sorted() }
        guard !senders.isEmpty else { return }
        let cutoff = now.saturatingSubtracting(configuration.machine.retry.window)
        for sender in senders {
            do {
                let count = try await store.discardWaiting(for: sender, createdBefore: cutoff, now: now, keeping: configuration.keepsHistory)
                guard count > 0 else { continue }
                counters.count(provider: Provider(sender.kind).label, outcome: "discarded", times: count)
                logger.warning(
                    "paused sender: notifications older than the retry window discarded",
                    metadata: ["sender": "\(sender)", "count": "\(count)", "window": "\(configuration.machine.retry.window / 1_000)s"])
            } catch {
                if Task.isCancelled { return }
                logger.error("the outbox cannot be read", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Counts and logs one decision.
    func record(_ decision: DispatchStateMachine.Decision, now: Int64) {
        let entry = decision.notification.entry
        let provider = decision.provider.label
        if case .postponed = decision.note {
            // Not sent: nothing to count (the pause or slow-down that held it was).
            logger.debug("postponed: its sender is paused or slowed down", metadata: ["app": "\(entry.app)", "subscription": "\(entry.subscriptionID)"])
            return
        }
        let key = SenderKey(entry)
        // Built only for a message that is logged (the metadata argument is an autoclosure):
        // most decisions are deliveries, logged at debug level.
        func metadata() -> Logger.Metadata {
            ["app": "\(entry.app)", "subscription": "\(entry.subscriptionID)", "provider": "\(provider)", "outcome": "\(decision.reason)"]
        }
        // Until the answer came, not until this turn (answers may wait for the next claim).
        if decision.answered { counters.answered(provider: provider, committedAt: decision.notification.createdAt, at: decision.answeredAt ?? now) }
        stats.record(
            DeliveryStats.Key(app: entry.app, provider: provider, destination: key.destination), now: now,
            delivered: decision.note == .delivered, status: decision.status, latency: decision.latency)
        if decision.resumed {
            logger.notice(
                key.isDestination ? "destination resumed: it accepts our sends again" : "application sender resumed: its credentials work again",
                metadata: ["sender": "\(key)"])
        }
        counters.count(provider: provider, outcome: decision.outcome)
        switch decision.note {
        case .delivered:
            logger.debug("delivered", metadata: metadata())
        case .retry(let at):
            counters.retried(provider: provider)
            logger.info("delivery will be retried", metadata: metadata().merging(["at": "\(at)"]) { $1 })
        case .slowDown:
            counters.retried(provider: provider)
            logger.warning(
                key.isDestination ? "destination asks to slow down: the sends to it wait" : "provider asks to slow down: the application's sending waits",
                metadata: metadata().merging(["sender": "\(key)"]) { $1 })
        case .discarded:
            logger.warning("retry window over: the subscription's waiting notifications are discarded", metadata: metadata())
        case .revoked:
            logger.warning("the provider refused the subscription: revoked (delivery_rejected)", metadata: metadata())
        case .paused(let newly):
            if newly && key.isDestination {
                logger.error(
                    "destination paused: it refuses our requests; the application's other sends go on, no subscription is revoked",
                    metadata: metadata().merging(["sender": "\(key)"]) { $1 })
            } else if newly {
                logger.error("application sender paused: its credentials or configuration are refused; no subscription is revoked", metadata: metadata())
            }
        case .failed:
            logger.error("the provider refused a payload the service built (a defect): the notification is dropped", metadata: metadata())
        case .paced(let until):
            // Not a retry of the schedule: the budget came down, and this one waits its turn.
            counters.paced(provider: provider)
            logger.info("the provider's quota was reached: the sender's pace comes down", metadata: metadata().merging(["sender": "\(key)", "at": "\(until)"]) { $1 })
        case .postponed:
            break
        }
    }
}
