import PushCore
import PushContracts

/// The delivery worker's decisions, without its awaits: events in (claimed, sent, answered,
/// settled, stopping), actions out (claim this many, send these, settle with these, sleep until
/// then, release those). A value type behind the ``Dispatcher``'s mutex, tested table-driven
/// with no store, socket or sleep, as async-http-client tests its connection pool.
///
/// It decides:
/// - how much to claim (free in-flight slots, at most ``Configuration/claimBatch`` at once) and
///   which senders to leave out (paused until their probe, slowed down until their time);
/// - which claimed notifications start now (per-provider and per-application bounds, and for a
///   destination, a webhook or a push service's origin, a bound of its own and a bound on all
///   destinations together, so that slow ones never hold every slot of the application) and
///   which wait for a slot; which were claimed while their sender was paused or slowed down
///   (postponed, no attempt counted);
/// - what each answer settles to (SPEC §8): delivered, retried on the persisted schedule
///   (never before `Retry-After`), discarded past the window, revoked (with a revoke
///   notification unless the token is dead), released while paused, dropped as a defect;
///   and which sender it pauses, slows down or resumes (a push service is paused for refusing
///   our VAPID credentials only when it refused ``refusalsToPause`` different subscriptions in a
///   row: one subscription made with another key cannot pause the push service of everyone);
/// - when to look again (the next due time, a probe, a slow-down's end; or when a send ends).
public struct DispatchStateMachine: Sendable {
    public struct Configuration: Sendable, Equatable {
        public var retry: RetryPolicy
        /// Sends at once per provider (`fcm`, `hms`, `webhook`).
        public var perProvider: Int
        /// Sends at once per application.
        public var perApp: Int
        /// Sends at once to one destination (a webhook, a push service's origin).
        public var perDestination: Int
        /// Sends at once to destinations, all together, per application: what they leave free
        /// of ``perApp`` is kept for the providers the operator configured (FCM, HMS, APNs).
        public var destinations: Int
        /// Notifications claimed and not settled, at most.
        public var maximumInFlight: Int
        /// Notifications claimed in one read of the outbox, at most.
        public var claimBatch: Int
        /// How long a paused sender waits before it is tried again (milliseconds).
        public var pauseProbe: Int64
        /// The senders' rate budgets (none: nothing is paced).
        public var pacing: PacingTable

        public init(
            retry: RetryPolicy = RetryPolicy(), perProvider: Int = 256, perApp: Int = 64, perDestination: Int? = nil, maximumInFlight: Int = 1_024,
            claimBatch: Int = 512, pauseProbe: Int64 = 30_000, pacing: PacingTable = .none
        ) {
            self.pacing = pacing
            self.retry = retry
            self.perProvider = max(1, perProvider)
            self.perApp = max(1, perApp)
            self.destinations = Self.destinations(perApp: self.perApp)
            self.perDestination = min(max(1, perDestination ?? Self.perDestination(perApp: self.perApp)), self.destinations)
            self.maximumInFlight = max(1, maximumInFlight)
            self.claimBatch = max(1, claimBatch)
            self.pauseProbe = max(1, pauseProbe)
        }

        /// Three quarters of the application's slots (at least one): a quarter is always free
        /// for FCM, HMS and APNs, however many destinations answer slowly.
        public static func destinations(perApp: Int) -> Int { max(1, perApp - perApp / 4) }

        /// The default bound of one destination: half the application's slots (at least one), at
        /// most ``defaultPerDestinationCeiling``.
        public static func perDestination(perApp: Int) -> Int { max(1, min(perApp / 2, defaultPerDestinationCeiling)) }
        /// The default ``perDestination`` is at most this: a webhook's server or a push service gets
        /// no more at once by default however large `perApp` is (an HTTP/1.1 webhook has 64
        /// connections; the rest would queue with their deadlines running).
        public static let defaultPerDestinationCeiling = 128
    }

    /// Different subscriptions a push service must refuse in a row (401/403, our VAPID
    /// credentials) before the sends to it are paused; fewer are retried on their own schedule.
    public static let refusalsToPause = 3

    /// Why a sender stopped sending.
    public struct Pause: Sendable, Equatable {
        public var reason: String
        /// Milliseconds since the epoch.
        public var since: Int64
        /// When it is tried again.
        public var probeAt: Int64
    }

    /// What to ask the outbox for.
    public enum Claim: Sendable, Equatable {
        /// Up to `limit` due notifications, senders in `excluding` left out, and of each sender
        /// in `capped` (paced: its budget's next second, less what waits already) at most its
        /// number.
        case claim(limit: Int, excluding: Set<SenderKey>, capped: [SenderKey: Int] = [:])
        /// Every slot is taken: wait until a send ends.
        case none
    }

    /// A claimed notification and the provider of its sender (`nil`: the application has no
    /// sender for it).
    public struct Claimed: Sendable, Equatable {
        public var notification: StoredNotification
        public var provider: Provider?
        /// Its sender, found once when it was claimed and carried to the send (the machine
        /// never calls it).
        public var sender: (any NotificationSender)?

        public init(_ notification: StoredNotification, provider: Provider?) {
            self.notification = notification
            self.provider = provider
        }

        /// `sender`: the notification's sender, `nil` when none is configured.
        public init(_ notification: StoredNotification, sender: (any NotificationSender)?) {
            self.notification = notification
            self.provider = sender?.provider
            self.sender = sender
        }

        /// Equal notifications through the same provider (senders are not compared).
        public static func == (lhs: Claimed, rhs: Claimed) -> Bool {
            lhs.notification == rhs.notification && lhs.provider == rhs.provider
        }
    }

    /// A notification to send now, through the sender of `provider`.
    public struct Send: Sendable, Equatable {
        public var notification: StoredNotification
        public var provider: Provider
        /// Its sender's key (its destination's, for a webhook or a push service).
        public var key: SenderKey
        /// The sender found at the claim.
        public var sender: (any NotificationSender)?
        /// When the send started (milliseconds since the epoch): its answer's latency counts
        /// from here.
        public var startedAt: Int64?

        public init(notification: StoredNotification, provider: Provider, sender: (any NotificationSender)? = nil, startedAt: Int64? = nil) {
            self.notification = notification
            self.provider = provider
            self.key = SenderKey(notification.entry)
            self.sender = sender
            self.startedAt = startedAt
        }

        /// Equal notifications through the same provider (senders are not compared).
        public static func == (lhs: Send, rhs: Send) -> Bool {
            lhs.notification == rhs.notification && lhs.provider == rhs.provider
        }
    }

    /// After a claim: look again at once, or sleep until a time (`nil`: until woken).
    public enum Next: Sendable, Equatable {
        case claimAgain
        case sleep(until: Int64?)
    }

    /// What one answer comes to: the settlement to store, and what to count and log.
    public struct Decision: Sendable, Equatable {
        public enum Note: Sendable, Equatable {
            case delivered
            /// Tried again at this time.
            case retry(at: Int64)
            /// Tried again at this time, and the application's sender waits until then.
            case slowDown(until: Int64)
            /// The retry window is over: the subscription's waiting notifications are discarded.
            case discarded
            /// The subscription is revoked (`delivery_rejected`).
            case revoked
            /// The sender is paused (`newly`: it was not before).
            case paused(newly: Bool)
            /// A payload the service built was refused: a defect, dropped.
            case failed
            /// Claimed while its sender was paused or slowed down: back to waiting until then,
            /// not sent, no attempt counted (neither counted nor kept in the history).
            case postponed(until: Int64)
            /// Refused for the provider's quota (429) while its sender is paced: the budget
            /// came down, and it waits until then, its retry schedule untouched (kept in the
            /// history as a retry).
            case paced(until: Int64)
        }

        public var settlement: Settlement
        /// `nil`: no sender is configured for the notification's kind.
        public var provider: Provider?
        public var notification: StoredNotification
        public var note: Note
        /// The reason the sender gave (logs).
        public var reason: String
        /// A revocation whose revoke notification is to be built before it is settled (the
        /// settlement carries none yet).
        public var needsNotice: Bool
        /// The provider answered for good (the latency histogram counts it).
        public var answered: Bool
        /// The sender was paused and this answer resumes it.
        public var resumed: Bool
        /// The HTTP status of the answer (`nil`: none came).
        public var status: Int? = nil
        /// From the send's start to its answer (milliseconds; `nil`: nothing was sent).
        public var latency: Int64? = nil
        /// When the answer came (milliseconds since the epoch; `nil`: not told).
        public var answeredAt: Int64? = nil
        /// What was answered, without the status: the delivery history's `reason`.
        public var detail: String? = nil

        /// The delivery history's `outcome`.
        public var historyOutcome: DeliveryAttempt.Outcome {
            switch note {
            case .delivered: .delivered
            case .retry, .slowDown, .paced: .retry
            case .discarded: .discarded
            case .revoked: .revoked
            case .paused, .postponed: .paused
            case .failed: .dropped
            }
        }

        /// When it is tried again (`retry` only).
        public var nextAt: Int64? {
            switch note {
            case .retry(let at): at
            case .slowDown(let until), .paced(let until): until
            default: nil
            }
        }

        /// The `outcome` label of `pushdispatch_deliveries_total`.
        public var outcome: String {
            switch note {
            case .delivered: "delivered"
            case .retry, .slowDown, .paused, .paced: "retry"
            case .discarded: "discarded"
            case .revoked: "revoked"
            case .failed: "failed"
            case .postponed: "postponed"
            }
        }

        /// Whether it was an attempt (a postponed notification was not sent).
        public var attempted: Bool {
            if case .postponed = note { return false }
            return true
        }
    }

    struct Completed: Sendable {
        var notification: StoredNotification
        var outcome: DeliveryOutcome
        var provider: Provider?
        var latency: Int64? = nil
        var key: SenderKey
        /// When the answer came (milliseconds since the epoch; `nil`: not told).
        var answeredAt: Int64? = nil
        /// Not sent: its sender was paused or slowed down until then.
        var postponedUntil: Int64? = nil
    }

    public let configuration: Configuration
    /// Claimed and not settled (waiting for a slot, being sent, or answered and not settled).
    public private(set) var inFlight = 0
    var byProvider: [Provider: Int] = [:]
    var byApp: [String: Int] = [:]
    /// Sends in flight per destination, and to all destinations per application.
    var byDestination: [SenderKey: Int] = [:]
    var destinationsByApp: [String: Int] = [:]
    /// Per push service: the different subscriptions it refused in a row (401/403).
    var refusals: [SenderKey: Set<Int64>] = [:]
    /// Claimed, waiting for a provider or application slot.
    var waiting: [Send] = []
    /// Answered (or unsendable), waiting for their settlement.
    var completed: [Completed] = []
    public private(set) var paused: [SenderKey: Pause] = [:]
    var slowedUntil: [SenderKey: Int64] = [:]
    /// The paced senders' buckets, made at their first send (issue 34).
    public private(set) var paces: [SenderKey: SendPace] = [:]
    /// The budgets, this instance's share of them.
    public private(set) var pacing: PacingTable
    /// Claimed notifications that waited for their sender's budget (each counted once).
    var heldForBudget: Set<Int64> = []
    /// Sends that waited for their sender's budget, by provider (metrics).
    public private(set) var budgetWaits: [Provider: Int] = [:]
    /// When the next token comes for a sender whose sends wait for one (a wake-up).
    var budgetWakeAt: Int64?
    /// How far ahead of its budget a paced sender's notifications are claimed (milliseconds):
    /// beyond it they stay in the outbox, not in slots.
    public static let pacingLookahead: Int64 = 1_000

    public init(configuration: Configuration) {
        self.configuration = configuration
        self.pacing = configuration.pacing
    }

    /// `instances` share each budget now (the live instances on a shared store): each sender's
    /// pace keeps its adaptation under its new share.
    public mutating func share(among instances: Int) {
        let instances = max(1, instances)
        guard instances != pacing.instances else { return }
        pacing.instances = instances
        for key in Array(paces.keys) {
            if let policy = pacing.policy(for: key) { paces[key]?.update(policy) }
        }
    }

    // MARK: - Claims

    /// What to claim now: as many as there are free slots (at most a batch), leaving out the
    /// senders paused until a later probe and those slowed down until later.
    /// `settling` notifications are being settled with this claim (they leave the flight if it
    /// succeeds, and the claim is undone if they cannot).
    public mutating func claim(now: Int64, settling: Int = 0) -> Claim {
        let free = configuration.maximumInFlight - max(0, inFlight - settling)
        guard free > 0 else { return .none }
        let limit = min(free, configuration.claimBatch)
        let (excluded, capped) = scope(now: now, limit: limit)
        return .claim(limit: limit, excluding: excluded, capped: capped)
    }

    /// The senders left out of claims at `now` (forgetting slow-downs that are over; a push
    /// service is never among them: the outbox keeps no origin to leave out, what is claimed
    /// for it is postponed), and how many of each paced sender's notifications a claim may
    /// take: its budget's next second (``pacingLookahead``) less what waits already; none
    /// left, it is left out. The rest stay in the outbox, where any
    /// instance may claim them when budget comes (claiming them to put them back cost each
    /// claim a batch of rows; with several instances it fed on itself). A sender whose room is
    /// `limit` or more is not capped: the claim cannot take more anyway (a budget above the
    /// rate costs the claim nothing).
    mutating func scope(now: Int64, limit: Int) -> (excluded: Set<SenderKey>, capped: [SenderKey: Int]) {
        slowedUntil = slowedUntil.filter { $0.value > now }
        var excluded = Set(paused.filter { $0.value.probeAt > now && $0.key.kind != .webpush }.keys).union(slowedUntil.keys.filter { $0.kind != .webpush })
        var capped: [SenderKey: Int] = [:]
        if !paces.isEmpty {
            let queued = queuedForBudget()
            for (key, pace) in paces where key.kind != .webpush && !excluded.contains(key) {
                let room = pace.capacity(now: now, within: Self.pacingLookahead) - queued[key, default: 0]
                if room <= 0 {
                    excluded.insert(key)
                } else if room < limit {
                    capped[key] = room
                }
            }
        }
        return (excluded, capped)
    }

    /// Waiting sends per paced sender.
    func queuedForBudget() -> [SenderKey: Int] {
        var queued: [SenderKey: Int] = [:]
        for send in waiting where paces[send.key] != nil { queued[send.key, default: 0] += 1 }
        return queued
    }

    /// The pace of `key`'s sender, made from the budget at its first use; `nil`: not paced.
    mutating func pace(_ key: SenderKey) -> SendPace? {
        if let pace = paces[key] { return pace }
        guard let policy = pacing.policy(for: key) else { return nil }
        let pace = SendPace(policy: policy)
        paces[key] = pace
        return pace
    }

    /// The earliest time a sender left out comes back (a probe, a slow-down's end).
    func resumeAt(now: Int64) -> Int64? {
        let probes = paused.values.map(\.probeAt).filter { $0 > now }
        let ends = slowedUntil.values.filter { $0 > now }
        let tokens = budgetWakeAt.map { [max($0, now.saturatingAdding(1))] } ?? []
        return (probes + ends + tokens).min()
    }

    /// Takes claimed notifications in; returns those that start now (the others wait for a
    /// slot). A notification without a sender waits on the retry schedule for the
    /// configuration to be fixed; one whose sender is paused or slowed down at `now` (the claim
    /// raced the decision, or could not see its destination) is postponed until then.
    public mutating func claimed(_ claimed: [Claimed], now: Int64) -> [Send] {
        inFlight += claimed.count
        var queued: [SenderKey: Int]?
        for item in claimed {
            if let provider = item.provider {
                let send = Send(notification: item.notification, provider: provider, sender: item.sender)
                if let pace = pace(send.key) {
                    // Beyond a second of its budget: back to the outbox until its turn at the
                    // whole budget would come (every instance's share: any of them may claim it
                    // then), not due at once (this instance would claim it again, a push
                    // service cannot be left out of a claim).
                    if queued == nil { queued = queuedForBudget() }
                    let ahead = queued?[send.key] ?? 0
                    queued?[send.key] = ahead + 1
                    if ahead >= pace.capacity(now: now, within: Self.pacingLookahead) {
                        let whole = pace.rate * Double(pacing.instances)
                        let turn = now.saturatingAdding(Int64(min(3_600_000, Double(ahead) / whole * 1_000)))
                        let until = max(pace.nextToken(now: now), turn)
                        completed.append(
                            Completed(
                                notification: item.notification, outcome: .pause(reason: "postponed"), provider: provider, key: send.key,
                                postponedUntil: until))
                        continue
                    }
                }
                if let until = heldUntil(send.key, now: now) {
                    completed.append(
                        Completed(notification: item.notification, outcome: .pause(reason: "postponed"), provider: provider, key: send.key, postponedUntil: until))
                } else {
                    waiting.append(send)
                }
            } else {
                let entry = item.notification.entry
                let reason = "no \(entry.kind.rawValue) provider is configured for \(entry.app)"
                completed.append(
                    Completed(
                        notification: item.notification, outcome: .retry(reason: reason, retryAfter: nil, slowDown: false), provider: nil, key: SenderKey(entry)))
            }
        }
        return startable(now: now)
    }

    /// Until when a sender's notifications wait (its probe, the end of its slow-down), `nil`
    /// when it sends now.
    func heldUntil(_ key: SenderKey, now: Int64) -> Int64? {
        if paused.isEmpty && slowedUntil.isEmpty { return nil }
        return [paused[key]?.probeAt, slowedUntil[key]].compactMap { $0 }.filter { $0 > now }.max()
    }

    /// What to do after a claim that returned `count` of `limit` (``claim(now:)``), given the
    /// next due time the outbox holds: answers to settle (a notification without a sender is
    /// answered at once) or a full batch mean looking again at once; else sleep until the next
    /// due time or the next return of a sender left out, whichever is first, and with no free
    /// slot, until a send ends.
    public func next(now: Int64, claimed count: Int, limit: Int?, nextDue: Int64?) -> Next {
        if hasAnswers { return .claimAgain }
        guard let limit else { return .sleep(until: nil) }
        if count > 0 && count == limit { return .claimAgain }
        var wakeAt = resumeAt(now: now)
        if let nextDue { wakeAt = min(wakeAt ?? .max, max(nextDue, now.saturatingAdding(1))) }
        return .sleep(until: wakeAt)
    }

    /// The waiting notifications that have a free provider and application slot now, and for
    /// a destination, a free slot of its own and of the application's destinations.
    ///
    /// Called on every wake-up with up to ``Configuration/maximumInFlight`` sends waiting: the
    /// ones that stay are not copied (they stay in place, in order), and a provider found full
    /// is not looked up again for the rest of the pass.
    /// A waiting send whose sender was paused or slowed down meanwhile is postponed.
    public mutating func startable(now: Int64) -> [Send] {
        guard !waiting.isEmpty else {
            budgetWakeAt = nil
            return []
        }
        if !paused.isEmpty || !slowedUntil.isEmpty {
            var held: [Completed] = []
            let machine = self
            waiting.removeAll { send in
                guard let until = machine.heldUntil(send.key, now: now) else { return false }
                held.append(Completed(notification: send.notification, outcome: .pause(reason: "postponed"), provider: send.provider, key: send.key, postponedUntil: until))
                return true
            }
            completed.append(contentsOf: held)
        }
        var ready: [Send] = []
        var byProvider = self.byProvider
        var byApp = self.byApp
        var byDestination = self.byDestination
        var destinationsByApp = self.destinationsByApp
        var fullProviders: [Provider] = []
        // The application last found full in this pass: its next sends are passed over without
        // a table lookup (with one application, every waiting send once its slots are taken).
        var fullApp: String?
        let perProvider = configuration.perProvider
        let perApp = configuration.perApp
        let perDestination = configuration.perDestination
        let destinations = configuration.destinations
        // The paced senders' buckets, moved out for the pass (no copy of the table).
        var paces = self.paces
        self.paces = [:]
        var heldForBudget = self.heldForBudget
        self.heldForBudget = []
        var budgetWaits = self.budgetWaits
        var exhausted: Set<SenderKey> = []
        var wakeAt: Int64?
        waiting.removeAll { send in
            if fullProviders.contains(send.provider) { return false }
            guard byProvider[send.provider, default: 0] < perProvider else {
                fullProviders.append(send.provider)
                return false
            }
            let app = send.notification.entry.app
            if app == fullApp { return false }
            guard byApp[app, default: 0] < perApp else {
                fullApp = app
                return false
            }
            if send.key.isDestination {
                guard destinationsByApp[app, default: 0] < destinations, byDestination[send.key, default: 0] < perDestination else { return false }
            }
            if !paces.isEmpty, paces[send.key] != nil {
                // A token of the sender's budget, or it waits (counted once) for the next.
                if exhausted.contains(send.key) || !paces[send.key]!.take(now: now) {
                    if exhausted.insert(send.key).inserted, let next = paces[send.key]?.nextToken(now: now) {
                        wakeAt = min(wakeAt ?? .max, next)
                    }
                    if heldForBudget.insert(send.notification.id).inserted {
                        budgetWaits[send.provider, default: 0] += 1
                        paces[send.key]?.countWait()
                    }
                    return false
                }
                if !heldForBudget.isEmpty { heldForBudget.remove(send.notification.id) }
            }
            if send.key.isDestination {
                destinationsByApp[app, default: 0] += 1
                byDestination[send.key, default: 0] += 1
            }
            byProvider[send.provider, default: 0] += 1
            byApp[app, default: 0] += 1
            ready.append(send)
            return true
        }
        self.byProvider = byProvider
        self.byApp = byApp
        self.byDestination = byDestination
        self.destinationsByApp = destinationsByApp
        self.paces = paces
        self.heldForBudget = heldForBudget
        self.budgetWaits = budgetWaits
        budgetWakeAt = wakeAt
        return ready
    }

    // MARK: - Answers

    /// A send ended with `outcome`: its slots are free; its settlement waits for
    /// ``decisions(now:random:)``.
    /// `at`: when the answer came (the latency histogram's end; else the decision's time).
    public mutating func sent(_ send: Send, outcome: DeliveryOutcome, latency: Int64? = nil, at: Int64? = nil) {
        completed.append(
            Completed(notification: send.notification, outcome: outcome, provider: send.provider, latency: latency, key: send.key, answeredAt: at))
        byProvider[send.provider, default: 1] -= 1
        byApp[send.notification.entry.app, default: 1] -= 1
        if send.key.isDestination {
            Self.decrement(&byDestination, send.key)
            Self.decrement(&destinationsByApp, send.notification.entry.app)
        }
    }

    /// One less; the key forgotten at zero (destinations come and go: the table stays as large
    /// as what is in flight).
    static func decrement<Key: Hashable>(_ counts: inout [Key: Int], _ key: Key) {
        let left = counts[key, default: 1] - 1
        counts[key] = left > 0 ? left : nil
    }

    /// Whether answers wait for their settlement.
    public var hasAnswers: Bool { !completed.isEmpty }
    /// How many answers wait to be decided and stored.
    public var answerCount: Int { completed.count }
    /// Whether claimed sends wait for a free slot or their budget.
    public var hasWaitingSends: Bool { !waiting.isEmpty }

    /// The settlements of every answer so far (in the order they came), deciding pauses,
    /// slow-downs and resumptions as it goes. `random` gives each retry's jitter (uniform in
    /// 0..<1). The notifications stay in flight until ``settled(_:)``.
    public mutating func decisions(now: Int64, random: () -> Double) -> [Decision] {
        let answers = completed
        completed.removeAll(keepingCapacity: true)
        // The jitter is drawn only for a retry (a draw from the system's generator is a system
        // call, and most answers are deliveries).
        return answers.map { decide($0, now: now, random: random) }
    }

    /// `count` notifications were settled (or given up): they leave the flight.
    public mutating func settled(_ count: Int) {
        inFlight = max(0, inFlight - count)
    }

    mutating func decide(_ answer: Completed, now: Int64, random: () -> Double) -> Decision {
        let notification = answer.notification
        let entry = notification.entry
        let key = answer.key
        var decision = Decision(
            settlement: .release(id: notification.id), provider: answer.provider, notification: notification, note: .failed,
            reason: answer.outcome.reason, needsNotice: false, answered: false, resumed: false)
        decision.status = answer.outcome.status
        decision.latency = answer.latency
        decision.answeredAt = answer.answeredAt
        decision.detail = answer.outcome.detail
        if let until = answer.postponedUntil {
            if now.saturatingSubtracting(notification.createdAt) > configuration.retry.window {
                // Held past the retry window from its creation (never tried): discarded, as a
                // paused sender's waiting notifications are.
                decision.note = .discarded
                decision.settlement = .discard(id: notification.id, subscriptionHandle: entry.subscriptionHandle)
                return decision
            }
            decision.note = .postponed(until: until)
            decision.settlement = .postpone(id: notification.id, until: until)
            decision.reason = "postponed: \(key) is paused or slowed down"
            return decision
        }
        var outcome = answer.outcome
        if key.kind == .webpush, case .pause(let reason) = outcome, !confirmsRefusal(key, subscription: entry.subscriptionHandle) {
            // One subscription refused (made with another application server key, or a push
            // service of the subscriber's own): that subscription waits, not the push service.
            outcome = .retry(reason: reason, retryAfter: nil, slowDown: false)
        }
        if var pace = paces[key] {
            switch outcome {
            case .retry(_, let retryAfter, true):
                // A quota answer to a paced sender: its budget comes down; this one waits for
                // the Retry-After (bounded), its retry schedule untouched.
                let until = pace.refused(now: now, retryAfter: retryAfter.map { max(0, $0.saturatingSubtracting(now)) })
                paces[key] = pace
                if !key.isDestination { decision.resumed = resume(key) }
                decision.note = .paced(until: until)
                decision.settlement = .postpone(id: notification.id, until: until)
                return decision
            case .delivered, .revoke, .revokeDeadToken, .failed:
                // Answered within the quota (a refusal of the message counts against it too).
                pace.accepted(now: now)
                paces[key] = pace
            case .retry, .pause, .refreshCredentials:
                break
            }
        }
        switch outcome {
        case .delivered:
            refusals[key] = nil
            decision.resumed = resume(key)
            decision.answered = true
            decision.note = .delivered
            decision.settlement = .delivered(id: notification.id)
        case .retry(_, let retryAfter, let slowDown):
            // An operator's provider that answers at all accepts our credentials; a destination
            // paused for refusing our requests is resumed by a delivery (or a revocation) only:
            // a 429 or a 5xx from it says nothing of that.
            if !key.isDestination { decision.resumed = resume(key) }
            let attempts = notification.attemptNumber
            let first = notification.firstAttemptAt ?? now
            guard let next = configuration.retry.nextAttempt(now: now, firstAttempt: first, attempts: attempts, retryAfter: retryAfter, random: random())
            else {
                decision.note = .discarded
                decision.settlement = .discard(id: notification.id, subscriptionHandle: entry.subscriptionHandle)
                return decision
            }
            if slowDown {
                slowedUntil[key] = max(slowedUntil[key] ?? 0, next)
                decision.note = .slowDown(until: next)
            } else {
                decision.note = .retry(at: next)
            }
            decision.settlement = .retry(id: notification.id, nextAttemptAt: next, firstAttemptAt: first, attempts: attempts)
        case .revokeDeadToken, .revoke:
            decision.resumed = resume(key)
            decision.answered = true
            decision.note = .revoked
            let deadToken: Bool = if case .revokeDeadToken = answer.outcome { true } else { false }
            // A revocation is never answered with another; a dead token cannot receive one (a
            // webhook still can).
            decision.needsNotice = entry.notification != .revoke && (!deadToken || entry.kind == .webhook)
            decision.settlement = .revoke(id: notification.id, subscriptionHandle: entry.subscriptionHandle, notification: nil)
        case .pause(let reason), .refreshCredentials(let reason):
            let newly = paused[key] == nil
            paused[key] = Pause(reason: reason, since: paused[key]?.since ?? now, probeAt: now.saturatingAdding(configuration.pauseProbe))
            decision.note = .paused(newly: newly)
            decision.settlement = .release(id: notification.id)
        case .failed:
            decision.resumed = resume(key)
            decision.answered = true
            decision.note = .failed
            decision.settlement = .drop(id: notification.id)
        }
        return decision
    }

    /// A push service refused `subscription` (401/403): whether that makes
    /// ``refusalsToPause`` different subscriptions in a row (its refusals are then forgotten).
    mutating func confirmsRefusal(_ key: SenderKey, subscription: Int64) -> Bool {
        if paused[key] != nil { return true }
        var seen = refusals[key] ?? []
        seen.insert(subscription)
        guard seen.count >= Self.refusalsToPause else {
            // Bounded: a table of at most this many per push service refused lately.
            if refusals.count >= 4_096, refusals[key] == nil { refusals.removeAll() }
            refusals[key] = seen
            return false
        }
        refusals[key] = nil
        return true
    }

    /// A paused sender whose send worked again (or that an operator resumed) is resumed;
    /// whether it was paused.
    public mutating func resume(_ key: SenderKey) -> Bool {
        paused.removeValue(forKey: key) != nil
    }

    // MARK: - Stopping

    /// Whether nothing is being sent: every notification in flight is waiting for a slot or for
    /// its settlement.
    public var nothingSending: Bool { inFlight - waiting.count - completed.count <= 0 }

    /// Stopping: the notifications claimed and not started, to release (they go back to
    /// waiting as they were, no attempt counted).
    public mutating func unsent() -> [StoredNotification] {
        defer { waiting.removeAll() }
        return waiting.map(\.notification)
    }

    /// No notification claimed, in flight or waiting for its settlement.
    public var isIdle: Bool { inFlight == 0 && completed.isEmpty }

    /// The applications with a paused sender of their own (their credentials), not counting
    /// paused destinations.
    public var pausedApplications: [String] { Array(Set(paused.keys.filter { !$0.isDestination }.map(\.app))).sorted() }

    /// Sends in flight by provider and by application (the operations overview).
    public var sending: (byProvider: [Provider: Int], byApp: [String: Int]) { (byProvider, byApp) }
}
