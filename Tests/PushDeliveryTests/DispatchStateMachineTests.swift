import PushCore
import PushContracts
@testable import PushDelivery
import PushHTTP
import Testing

/// The delivery worker's decisions, events in and actions out: no store, no socket, no sleep.
@Suite("The dispatcher's decisions")
struct DispatchStateMachineTests {
    typealias Machine = DispatchStateMachine
    static let now: Int64 = 1_800_000_000_000

    static func notification(
        _ id: Int64, app: String = "toto", kind: SubscriptionKind = .fcm, event: NotificationKind = .value, attempts: Int = 0,
        firstAttemptAt: Int64? = nil, destination: String = "orders", endpoint: String = "https://push.example.net/send/x"
    ) -> StoredNotification {
        let target: String? =
            switch kind {
            case .webhook: nil
            case .webpush: WebPushContext(endpoint: endpoint, p256dh: "BKey", auth: "auth").canonicalText
            default: "token-\(id)"
            }
        let entry = OutboxEntry(
            app: app, subscriptionHandle: id, subscriptionID: "s\(id)", kind: kind, target: target, destination: kind == .webhook ? destination : nil, notification: event,
            payload: [], recordSeq: 1)
        return StoredNotification(id: id, entry: entry, createdAt: now - 10, nextAttemptAt: now, attempts: attempts, firstAttemptAt: firstAttemptAt)
    }

    static func provider(_ kind: SubscriptionKind) -> Provider {
        Provider(kind)
    }

    /// A machine that claimed `notifications` and sent them all.
    static func sending(_ notifications: [StoredNotification], configuration: Machine.Configuration = .init()) -> (Machine, [Machine.Send]) {
        var machine = Machine(configuration: configuration)
        let sends = machine.claimed(notifications.map { .init($0, provider: provider($0.entry.kind)) }, now: Self.now)
        return (machine, sends)
    }

    /// The decision the machine takes for one answer (jitter: the nominal delay).
    static func decide(_ notification: StoredNotification, _ outcome: DeliveryOutcome, at now: Int64 = now) -> Machine.Decision {
        var (machine, sends) = sending([notification])
        machine.sent(sends[0], outcome: outcome)
        return machine.decisions(now: now, random: { 0.5 })[0]
    }

    @Test("claims take the free slots, at most a batch at once; none while every slot is taken")
    func claims() {
        var machine = Machine(configuration: .init(maximumInFlight: 4, claimBatch: 3))
        #expect(machine.claim(now: Self.now) == .claim(limit: 3, excluding: []))
        _ = machine.claimed((1...3).map { .init(Self.notification($0), provider: .fcm) }, now: Self.now)
        #expect(machine.claim(now: Self.now) == .claim(limit: 1, excluding: []))
        _ = machine.claimed([.init(Self.notification(4), provider: .fcm)], now: Self.now)
        #expect(machine.claim(now: Self.now) == .none)
        #expect(machine.inFlight == 4)
        // Answered is not settled: the slot frees once the settlement is stored.
        let sends = machine.startable(now: Self.now)
        #expect(sends.isEmpty)  // all four started when claimed
        machine.settled(2)
        #expect(machine.claim(now: Self.now) == .claim(limit: 2, excluding: []))
    }

    @Test("per provider and per application at most so many at once; the rest waits for a slot, in order")
    func bounds() {
        var machine = Machine(configuration: .init(perProvider: 2, perApp: 3))
        let claimed: [StoredNotification] = [
            Self.notification(1), Self.notification(2), Self.notification(3), Self.notification(4, app: "other"),
            Self.notification(5, kind: .webhook), Self.notification(6, kind: .hms),
        ]
        let started = machine.claimed(claimed.map { .init($0, provider: Self.provider($0.entry.kind)) }, now: Self.now)
        // fcm: 1 and 2 (its bound); toto: 1, 2 and the webhook 5 (its bound); 6 waits for toto.
        #expect(started.map(\.notification.id) == [1, 2, 5])
        #expect(machine.startable(now: Self.now).isEmpty)
        machine.sent(started[0], outcome: .delivered(reference: nil))
        // A free fcm slot and a free toto slot: 3 first (claim order), then 4 waits for fcm.
        #expect(machine.startable(now: Self.now).map(\.notification.id) == [3])
        machine.sent(started[2], outcome: .delivered(reference: nil))
        #expect(machine.startable(now: Self.now).map(\.notification.id) == [6])
        machine.sent(started[1], outcome: .delivered(reference: nil))
        #expect(machine.startable(now: Self.now).map(\.notification.id) == [4])
    }

    @Test("an application found full is passed over for the rest of the pass, the others' sends still start, in order")
    func fullApplicationsInterleaved() {
        var machine = Machine(configuration: .init(perProvider: 100, perApp: 1))
        let claimed = [
            Self.notification(1, app: "a"), Self.notification(2, app: "a"), Self.notification(3, app: "b"), Self.notification(4, app: "a"),
            Self.notification(5, app: "b"), Self.notification(6, app: "c"), Self.notification(7, app: "a"), Self.notification(8, app: "c"),
        ]
        let started = machine.claimed(claimed.map { .init($0, provider: .fcm) }, now: Self.now)
        #expect(started.map(\.notification.id) == [1, 3, 6])
        #expect(machine.startable(now: Self.now).isEmpty)
        machine.sent(started[1], outcome: .delivered(reference: nil))
        // b's slot is free: its next send starts; a and c, still full, keep theirs waiting.
        #expect(machine.startable(now: Self.now).map(\.notification.id) == [5])
        machine.sent(started[0], outcome: .delivered(reference: nil))
        machine.sent(started[2], outcome: .delivered(reference: nil))
        #expect(machine.startable(now: Self.now).map(\.notification.id) == [2, 8])
        #expect(machine.sending.byApp == ["a": 1, "b": 1, "c": 1])
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var notification: StoredNotification
        var outcome: DeliveryOutcome
        var settlement: Settlement
        var label: String
        var needsNotice = false
        var answered = false
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "delivered", notification: notification(1), outcome: .delivered(reference: "m1"), settlement: .delivered(id: 1),
            label: "delivered", answered: true),
        Row(
            name: "a first failure: 1 s later", notification: notification(2), outcome: .retry(reason: "503", retryAfter: nil, slowDown: false),
            settlement: .retry(id: 2, nextAttemptAt: now + 1_000, firstAttemptAt: now, attempts: 1), label: "retry"),
        Row(
            name: "a fourth failure: 8 s later, the window counted from the first",
            notification: notification(3, attempts: 3, firstAttemptAt: now - 7_000),
            outcome: .retry(reason: "503", retryAfter: nil, slowDown: false),
            settlement: .retry(id: 3, nextAttemptAt: now + 8_000, firstAttemptAt: now - 7_000, attempts: 4), label: "retry"),
        Row(
            name: "never before Retry-After", notification: notification(4),
            outcome: .retry(reason: "503", retryAfter: now + 60_000, slowDown: false),
            settlement: .retry(id: 4, nextAttemptAt: now + 60_000, firstAttemptAt: now, attempts: 1), label: "retry"),
        Row(
            name: "past the 2-hour window: discarded", notification: notification(5, attempts: 12, firstAttemptAt: now - 7_199_000),
            outcome: .retry(reason: "503", retryAfter: nil, slowDown: false), settlement: .discard(id: 5, subscriptionHandle: 5),
            label: "discarded"),
        Row(
            name: "a dead device token: revoked, nothing sent to it", notification: notification(6),
            outcome: .revokeDeadToken(reason: "UNREGISTERED"), settlement: .revoke(id: 6, subscriptionHandle: 6, notification: nil),
            label: "revoked", answered: true),
        Row(
            name: "a dead webhook: revoked, its revoke still sent", notification: notification(7, kind: .webhook),
            outcome: .revokeDeadToken(reason: "410"), settlement: .revoke(id: 7, subscriptionHandle: 7, notification: nil), label: "revoked",
            needsNotice: true, answered: true),
        Row(
            name: "another fatal answer: revoked with a revoke notification", notification: notification(8),
            outcome: .revoke(reason: "400"), settlement: .revoke(id: 8, subscriptionHandle: 8, notification: nil), label: "revoked",
            needsNotice: true, answered: true),
        Row(
            name: "a refused revocation is not answered with another", notification: notification(9, event: .revoke),
            outcome: .revoke(reason: "400"), settlement: .revoke(id: 9, subscriptionHandle: 9, notification: nil), label: "revoked",
            answered: true),
        Row(
            name: "our credentials refused: released, no attempt counted", notification: notification(10),
            outcome: .pause(reason: "THIRD_PARTY_AUTH_ERROR"), settlement: .release(id: 10), label: "retry"),
        Row(
            name: "a fresh token refused as well: released", notification: notification(11),
            outcome: .refreshCredentials(reason: "401"), settlement: .release(id: 11), label: "retry"),
        Row(
            name: "a payload the service built refused: dropped, the subscription kept", notification: notification(12),
            outcome: .failed(reason: "INVALID_ARGUMENT"), settlement: .drop(id: 12), label: "failed", answered: true),
    ]

    @Test("each answer settles as SPEC §8 says", arguments: rows)
    func answers(row: Row) {
        let decision = Self.decide(row.notification, row.outcome)
        #expect(decision.settlement == row.settlement)
        #expect(decision.outcome == row.label)
        #expect(decision.needsNotice == row.needsNotice)
        #expect(decision.answered == row.answered)
    }

    @Test("jitter spreads a retry over ±20 % of its delay", arguments: [(0.0, 800), (0.5, 1_000), (0.999_999, 1_199)])
    func jitter(random: Double, delay: Int64) {
        var (machine, sends) = Self.sending([Self.notification(1)])
        machine.sent(sends[0], outcome: .retry(reason: "503", retryAfter: nil, slowDown: false))
        let decision = machine.decisions(now: Self.now, random: { random })[0]
        guard case .retry(_, let next, _, _) = decision.settlement else {
            Issue.record("not a retry: \(decision.settlement)")
            return
        }
        #expect(next - Self.now == delay)
    }

    @Test("a pause leaves the application's sender of that kind out until its probe; an answer that works resumes it")
    func pause() {
        var (machine, sends) = Self.sending([Self.notification(1), Self.notification(2, kind: .webhook)])
        machine.sent(sends[0], outcome: .pause(reason: "THIRD_PARTY_AUTH_ERROR"))
        let paused = machine.decisions(now: Self.now, random: { 0.5 })
        #expect(paused[0].note == .paused(newly: true))
        machine.settled(1)
        let fcm = SenderKey(app: "toto", kind: .fcm)
        #expect(machine.paused[fcm]?.probeAt == Self.now + 30_000)
        #expect(machine.pausedApplications == ["toto"])
        #expect(machine.claim(now: Self.now + 1) == .claim(limit: 512, excluding: [fcm]))
        // Paused again before the probe (a send that was on its way): not newly.
        machine.sent(.init(notification: Self.notification(3), provider: .fcm), outcome: .pause(reason: "again"))
        #expect(machine.decisions(now: Self.now + 2, random: { 0.5 })[0].note == .paused(newly: false))
        #expect(machine.paused[fcm]?.since == Self.now)
        // At the probe it is claimed again; the probe's success resumes it.
        #expect(machine.claim(now: Self.now + 30_002) == .claim(limit: 512, excluding: []))
        _ = machine.claimed([.init(Self.notification(4), provider: .fcm)], now: Self.now + 30_002)
        machine.sent(.init(notification: Self.notification(4), provider: .fcm), outcome: .delivered(reference: nil))
        #expect(machine.decisions(now: Self.now + 30_003, random: { 0.5 })[0].resumed)
        #expect(machine.paused.isEmpty)
        // The webhook sender was never paused.
        machine.sent(sends[1], outcome: .delivered(reference: nil))
        #expect(!machine.decisions(now: Self.now + 30_004, random: { 0.5 })[0].resumed)
    }

    @Test("a webhook's pause and slow-down leave out that destination only, not the application's other webhooks")
    func webhookDestination() {
        var (machine, sends) = Self.sending([
            Self.notification(1, kind: .webhook, destination: "orders"), Self.notification(2, kind: .webhook, destination: "audit"),
        ])
        machine.sent(sends[0], outcome: AnswerClassifier.webhook(ProviderAnswer(status: 401, body: []), now: Self.now))
        machine.sent(sends[1], outcome: AnswerClassifier.webhook(ProviderAnswer(status: 429, body: []), now: Self.now))
        let decisions = machine.decisions(now: Self.now, random: { 0.5 })
        #expect(decisions[0].note == .paused(newly: true))
        #expect(decisions[0].settlement == .release(id: 1))
        guard case .slowDown = decisions[1].note else {
            Issue.record("not a slow-down: \(decisions[1].note)")
            return
        }
        machine.settled(2)
        let orders = SenderKey(app: "toto", kind: .webhook, destination: "orders")
        let audit = SenderKey(app: "toto", kind: .webhook, destination: "audit")
        #expect(machine.claim(now: Self.now + 1) == .claim(limit: 512, excluding: [orders, audit]))
        #expect(!machine.claim(now: Self.now + 1).excludes(SenderKey(app: "toto", kind: .webhook, destination: "billing")))
        #expect(!machine.claim(now: Self.now + 1).excludes(SenderKey(app: "toto", kind: .fcm)))
    }

    @Test("a slow-down leaves the application's sender out until the retry time; other applications go on")
    func slowDown() {
        var (machine, sends) = Self.sending([Self.notification(1)])
        machine.sent(sends[0], outcome: .retry(reason: "QUOTA_EXCEEDED", retryAfter: Self.now + 60_000, slowDown: true))
        let decision = machine.decisions(now: Self.now, random: { 0.5 })[0]
        #expect(decision.note == .slowDown(until: Self.now + 60_000))
        machine.settled(1)
        let toto = SenderKey(app: "toto", kind: .fcm)
        #expect(machine.claim(now: Self.now + 59_999) == .claim(limit: 512, excluding: [toto]))
        #expect(machine.next(now: Self.now + 59_999, claimed: 0, limit: 512, nextDue: nil) == .sleep(until: Self.now + 60_000))
        #expect(machine.claim(now: Self.now + 60_000) == .claim(limit: 512, excluding: []))
    }

    static func push(_ id: Int64, origin: String, app: String = "toto") -> StoredNotification {
        notification(id, app: app, kind: .webpush, endpoint: origin + "/send/\(id)")
    }

    @Test("a push service's refusals pause that push service only, and only once three different subscriptions were refused in a row (issue 33)")
    func pushServiceRefusals() {
        let evil = "https://evil.example", good = "https://fcm.googleapis.com"
        var (machine, sends) = Self.sending([
            Self.push(1, origin: evil), Self.push(2, origin: evil), Self.push(3, origin: good), Self.notification(4), Self.push(5, origin: evil),
            Self.push(6, origin: evil),
        ])
        #expect(sends.count == 6)
        let refused = AnswerClassifier.webPush(ProviderAnswer(status: 403, body: []), now: Self.now)
        // One subscription, twice: retried on its own schedule, nothing paused.
        machine.sent(sends[0], outcome: refused)
        machine.sent(sends[0], outcome: refused)
        var decisions = machine.decisions(now: Self.now, random: { 0.5 })
        #expect(decisions.map(\.note) == [.retry(at: Self.now + 1_000), .retry(at: Self.now + 1_000)])
        #expect(machine.paused.isEmpty)
        // A second subscription, and a delivery at the origin in between: the streak starts again.
        machine.sent(sends[1], outcome: refused)
        machine.sent(sends[4], outcome: .delivered(reference: nil))
        machine.sent(sends[5], outcome: refused)
        _ = machine.decisions(now: Self.now, random: { 0.5 })
        #expect(machine.paused.isEmpty)
        // Three different subscriptions in a row: the push service is paused, alone.
        machine.sent(sends[0], outcome: refused)
        machine.sent(sends[1], outcome: refused)
        decisions = machine.decisions(now: Self.now, random: { 0.5 })
        #expect(decisions.map(\.note) == [.retry(at: Self.now + 1_000), .paused(newly: true)])
        let evilKey = SenderKey(app: "toto", kind: .webpush, destination: evil)
        #expect(Array(machine.paused.keys) == [evilKey])
        #expect(machine.pausedApplications.isEmpty)  // no credential of the application's is refused
        // Not left out of claims (the outbox keeps no origin): what is claimed for it is postponed.
        #expect(machine.claim(now: Self.now + 1) == .claim(limit: 512, excluding: []))
        #expect(machine.heldUntil(evilKey, now: Self.now + 1) == Self.now + 30_000)
        // A 429 or a 5xx from it does not resume it (they say nothing of our credentials).
        machine.sent(sends[0], outcome: AnswerClassifier.webPush(ProviderAnswer(status: 429, body: []), now: Self.now))
        machine.sent(sends[1], outcome: AnswerClassifier.webPush(ProviderAnswer(status: 503, body: []), now: Self.now))
        #expect(machine.decisions(now: Self.now, random: { 0.5 }).allSatisfy { !$0.resumed })
        #expect(machine.paused[evilKey] != nil)
        // The other push service and FCM go on.
        machine.sent(sends[2], outcome: .delivered(reference: nil))
        machine.sent(sends[3], outcome: .delivered(reference: nil))
        #expect(machine.decisions(now: Self.now, random: { 0.5 }).map(\.note) == [.delivered, .delivered])
    }

    @Test("a push service's 429 slows down the sends to it alone (issue 33: Retry-After: 3600 held every Web Push user)")
    func pushServiceSlowDown() {
        let evil = "https://evil.example:8443"
        var (machine, sends) = Self.sending([Self.push(1, origin: evil), Self.push(2, origin: "https://updates.push.services.mozilla.com")])
        machine.sent(sends[0], outcome: AnswerClassifier.webPush(ProviderAnswer(status: 429, retryAfter: "3600", body: []), now: Self.now))
        #expect(machine.decisions(now: Self.now, random: { 0.5 })[0].note == .slowDown(until: Self.now + 3_600_000))
        machine.settled(1)
        let evilKey = SenderKey(app: "toto", kind: .webpush, destination: evil)
        #expect(machine.heldUntil(evilKey, now: Self.now + 1) == Self.now + 3_600_000)
        #expect(machine.heldUntil(SenderKey(app: "toto", kind: .webpush, destination: "https://updates.push.services.mozilla.com"), now: Self.now + 1) == nil)
        #expect(machine.heldUntil(SenderKey(app: "toto", kind: .fcm), now: Self.now + 1) == nil)
    }

    @Test("claimed while its push service is held (a claim cannot leave a push service out): postponed, not sent, no attempt; past the window, discarded")
    func postponed() {
        let evil = "https://evil.example"
        var (machine, sends) = Self.sending([Self.push(1, origin: evil)])
        machine.sent(sends[0], outcome: .retry(reason: "429", retryAfter: Self.now + 60_000, slowDown: true))
        _ = machine.decisions(now: Self.now, random: { 0.5 })
        machine.settled(1)
        // The outbox keeps no origin: its claims take the push service's notifications in.
        #expect(machine.claim(now: Self.now + 1) == .claim(limit: 512, excluding: []))
        var old = Self.push(4, origin: evil)
        old.createdAt = Self.now - 7_200_001
        #expect(
            machine.claimed(
                [.init(Self.push(2, origin: evil), provider: .webpush), .init(Self.push(3, origin: "https://other.example"), provider: .webpush), .init(old, provider: .webpush)],
                now: Self.now + 5
            ).map(\.notification.id) == [3])
        let decisions = machine.decisions(now: Self.now + 5, random: { 0.5 })
        #expect(decisions[0].settlement == .postpone(id: 2, until: Self.now + 60_000))
        #expect(!decisions[0].attempted)
        // Held past the retry window from its creation (it was never tried): discarded, as a
        // paused sender's notifications are.
        #expect(decisions[1].settlement == .discard(id: 4, subscriptionHandle: 4))
        #expect(decisions[1].attempted)
        // One that was claimed before the slow-down and waits for a slot is postponed too.
        var slots = Machine(configuration: .init(perApp: 2))
        let first = slots.claimed([.init(Self.push(5, origin: evil), provider: .webpush), .init(Self.push(6, origin: evil), provider: .webpush)], now: Self.now)
        #expect(first.map(\.notification.id) == [5])
        slots.sent(first[0], outcome: .retry(reason: "429", retryAfter: Self.now + 60_000, slowDown: true))
        _ = slots.decisions(now: Self.now, random: { 0.5 })
        #expect(slots.startable(now: Self.now + 1).isEmpty)
        #expect(slots.decisions(now: Self.now + 1, random: { 0.5 }).map(\.settlement) == [.postpone(id: 6, until: Self.now + 60_000)])
    }

    @Test("slots: one destination holds at most half of the application's, all destinations three quarters; FCM keeps the rest (issue 33)")
    func destinationSlots() {
        let configuration = Machine.Configuration(perApp: 8)
        #expect(configuration.perDestination == 4 && configuration.destinations == 6)
        // Eight slow endpoints on one push service: four go, FCM is not held up.
        var (machine, sends) = Self.sending((1...8).map { Self.push($0, origin: "https://slow.example") } + [Self.notification(9)], configuration: configuration)
        #expect(sends.map(\.notification.id) == [1, 2, 3, 4, 9])
        // Eight slow push services: six go, two slots stay for FCM.
        (machine, sends) = Self.sending(
            (1...8).map { Self.push($0, origin: "https://slow\($0).example") } + [Self.notification(9), Self.notification(10)], configuration: configuration)
        #expect(sends.map(\.notification.id) == [1, 2, 3, 4, 5, 6, 9, 10])
        // A destination's answer frees its slots.
        machine.sent(sends[0], outcome: .delivered(reference: nil))
        #expect(machine.startable(now: Self.now).map(\.notification.id) == [7])
        #expect(machine.byDestination.count == 6)
        // A webhook counts as a destination too; an explicit bound is kept within the share.
        #expect(Machine.Configuration(perApp: 8, perDestination: 100).perDestination == 6)
        // The default is half of perApp, at most 128 however large perApp is; set, it may be more.
        #expect(Machine.Configuration(perApp: 256).perDestination == 128 && Machine.Configuration(perApp: 512).perDestination == 128)
        #expect(Machine.Configuration(perApp: 512, perDestination: 300).perDestination == 300)
        (machine, sends) = Self.sending((1...4).map { Self.notification($0, kind: .webhook) }, configuration: .init(perApp: 8, perDestination: 1))
        #expect(sends.map(\.notification.id) == [1])
    }

    struct Wake: Sendable {
        var claimed: Int
        var limit: Int?
        var nextDue: Int64?
        var expected: Machine.Next
    }

    @Test(
        "after a claim: a full batch looks again at once; else sleep until the next due time; with no free slot, until a send ends",
        arguments: [
            Wake(claimed: 512, limit: 512, nextDue: nil, expected: .claimAgain),
            Wake(claimed: 3, limit: 512, nextDue: now + 2_000, expected: .sleep(until: now + 2_000)),
            Wake(claimed: 0, limit: 512, nextDue: now - 5, expected: .sleep(until: now + 1)),  // due already: a moment later
            Wake(claimed: 0, limit: 512, nextDue: nil, expected: .sleep(until: nil)),
            Wake(claimed: 0, limit: nil, nextDue: nil, expected: .sleep(until: nil)),
        ])
    func wake(_ wake: Wake) {
        let machine = Machine(configuration: .init())
        #expect(machine.next(now: Self.now, claimed: wake.claimed, limit: wake.limit, nextDue: wake.nextDue) == wake.expected)
    }

    @Test("a notification whose application has no such sender waits on the retry schedule")
    func noSender() {
        var machine = Machine(configuration: .init())
        #expect(machine.claimed([.init(Self.notification(1, app: "gone"), provider: nil)], now: Self.now).isEmpty)
        #expect(machine.hasAnswers)
        // Answered at once: the worker settles it before it sleeps.
        #expect(machine.next(now: Self.now, claimed: 1, limit: 512, nextDue: Self.now + 60_000) == .claimAgain)
        let decision = machine.decisions(now: Self.now, random: { 0.5 })[0]
        #expect(decision.provider == nil)
        #expect(decision.settlement == .retry(id: 1, nextAttemptAt: Self.now + 1_000, firstAttemptAt: Self.now, attempts: 1))
        #expect(decision.reason == "no mobile provider is configured for gone")
    }

    @Test("stopping: what waits for a slot is released; nothing is sending once every send was answered")
    func stopping() {
        var (machine, sends) = Self.sending(
            (1...3).map { Self.notification($0) }, configuration: .init(perProvider: 1))
        #expect(sends.map(\.notification.id) == [1])
        #expect(!machine.nothingSending)
        machine.sent(sends[0], outcome: .delivered(reference: nil))
        #expect(machine.nothingSending)
        #expect(machine.unsent().map(\.id) == [2, 3])
        #expect(machine.unsent().isEmpty)
        _ = machine.decisions(now: Self.now, random: { 0.5 })
        machine.settled(1)
        machine.settled(2)
        #expect(machine.isIdle)
    }
}

extension DispatchStateMachine.Claim {
    func excludes(_ key: SenderKey) -> Bool {
        if case .claim(_, let excluding, _) = self { excluding.contains(key) } else { false }
    }

    /// How many of `key`'s notifications the claim may take (`nil`: not capped).
    func cap(_ key: SenderKey) -> Int? {
        if case .claim(_, _, let capped) = self { capped[key] } else { nil }
    }
}
