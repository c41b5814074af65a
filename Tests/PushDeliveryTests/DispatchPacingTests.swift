import PushCore
import PushContracts
@testable import PushDelivery
import Testing

/// Pacing in the dispatcher's decisions (issue 34): sends wait for their sender's budget in the
/// machine, claims stop at a second of it, a quota answer brings the pace down without touching
/// the retry schedule.
@Suite("The dispatcher's decisions: pacing")
struct DispatchPacingTests {
    typealias Machine = DispatchStateMachine
    typealias Tests = DispatchStateMachineTests
    static let now = Tests.now
    static let toto = SenderKey(app: "toto", kind: .fcm)

    /// FCM paced at `perSecond` for every application.
    static func machine(fcm perSecond: Double, maximumInFlight: Int = 1_024) -> Machine {
        Machine(configuration: .init(perProvider: 1_024, perApp: 1_024, maximumInFlight: maximumInFlight, pacing: PacingTable(byKind: [.fcm: perSecond])))
    }

    static func claim(_ machine: inout Machine, _ ids: ClosedRange<Int64>, kind: SubscriptionKind = .fcm, app: String = "toto", at now: Int64 = now) -> [Machine.Send] {
        machine.claimed(ids.map { .init(Tests.notification($0, app: app, kind: kind), provider: Provider(kind)) }, now: now)
    }

    @Test("claimed sends start as the budget's tokens come, in order, and the machine wakes for the next token")
    func spread() {
        // 10 a second: a burst of 1, then one every 100 ms.
        var machine = Self.machine(fcm: 10)
        let first = Self.claim(&machine, 1...5)
        #expect(first.map(\.notification.id) == [1])
        #expect(machine.next(now: Self.now, claimed: 5, limit: 512, nextDue: nil) == .sleep(until: Self.now + 100))
        #expect(machine.startable(now: Self.now + 99).isEmpty)
        #expect(machine.startable(now: Self.now + 100).map(\.notification.id) == [2])
        #expect(machine.startable(now: Self.now + 250).map(\.notification.id) == [3])
        // A token taken late moves the schedule (a burst of 1 saves nothing up).
        #expect(machine.startable(now: Self.now + 300).isEmpty)
        #expect(machine.startable(now: Self.now + 350).map(\.notification.id) == [4])
        // Four waited for the budget, each counted once however many passes it waited.
        #expect(machine.budgetWaits[.fcm] == 4)
        #expect(machine.paces[Self.toto]?.waited == 4)
        // Unpaced senders go at once beside it.
        let hms = Self.claim(&machine, 10...12, kind: .hms, at: Self.now + 350)
        #expect(hms.map(\.notification.id) == [10, 11, 12])
    }

    @Test("claims leave a paced sender out once a second of its budget waits; other applications' senders are claimed")
    func lookahead() {
        var machine = Self.machine(fcm: 10)
        _ = Self.claim(&machine, 1...11)
        // 1 started, 10 wait: a second's worth (10 more tokens within 1 s, the next at +100).
        #expect(machine.claim(now: Self.now).excludes(Self.toto))
        #expect(!machine.claim(now: Self.now).excludes(SenderKey(app: "titi", kind: .fcm)))
        _ = machine.startable(now: Self.now + 500)
        #expect(!machine.claim(now: Self.now + 500).excludes(Self.toto))
    }

    @Test("what a claim takes beyond a second of a paced sender's budget goes back until its turn at the whole budget (every instance's share); the next claim leaves the sender out")
    func beyondLookahead() {
        var machine = Self.machine(fcm: 20)
        // Two instances: each paces at 10 a second, and the turns count 20.
        machine.share(among: 2)
        let sends = Self.claim(&machine, 1...15)
        #expect(sends.count == 1)
        let decisions = machine.decisions(now: Self.now, random: { 0.5 })
        // 11 fit in this instance's next second (the first and ten more tokens), 4 go back:
        // the 11th to 14th waiting, at 20 a second, 550 to 700 ms from now.
        #expect(decisions.map(\.notification.id) == [12, 13, 14, 15])
        #expect(decisions.map(\.settlement) == zip([12, 13, 14, 15], [550, 600, 650, 700]).map { Settlement.postpone(id: $0, until: Self.now + $1) })
        #expect(decisions.allSatisfy { !$0.attempted })
        machine.settled(4)
        #expect(machine.claim(now: Self.now).excludes(Self.toto))
    }

    @Test("a push service cannot be left out of a claim: what is claimed beyond a second of its budget goes back until its turn")
    func webPushBeyondLookahead() {
        var machine = Machine(configuration: .init(pacing: PacingTable(byKind: [.webpush: 10])))
        let sends = machine.claimed((1...15).map { .init(Tests.push($0, origin: "https://push.example.net"), provider: Provider(.webpush)) }, now: Self.now)
        #expect(sends.count == 1)
        let decisions = machine.decisions(now: Self.now, random: { 0.5 })
        // 11 fit in the next second (the first and ten more tokens), 4 are postponed.
        #expect(decisions.count == 4)
        for decision in decisions {
            guard case .postponed(let until) = decision.note else {
                Issue.record("not postponed: \(decision.note)")
                continue
            }
            #expect(until > Self.now + 1_000 && until <= Self.now + 1_500)
            #expect(!decision.attempted)
        }
    }

    @Test("a quota answer to a paced sender brings its pace down and postpones that notification, retry schedule untouched; other answers count as accepted")
    func quotaAnswer() {
        var machine = Self.machine(fcm: 10_000)
        let sends = Self.claim(&machine, 1...300)
        #expect(sends.count == 300)
        for send in sends.prefix(200) { machine.sent(send, outcome: .delivered(reference: nil)) }
        machine.sent(sends[200], outcome: .retry(reason: "QUOTA_EXCEEDED", retryAfter: Self.now + 5_000, slowDown: true))
        let decisions = machine.decisions(now: Self.now + 50, random: { 0.5 })
        let refused = decisions[200]
        // Retry-After is a time: five seconds from the answer.
        #expect(refused.note == .paced(until: Self.now + 5_000))
        #expect(refused.settlement == .postpone(id: 201, until: Self.now + 5_000))
        #expect(refused.historyOutcome == .retry)
        #expect(refused.attempted)
        // 200 accepted in the second before: 190 a second now, not slowed down.
        #expect(machine.paces[Self.toto]?.rate == 190)
        machine.settled(201)
        #expect(!machine.claim(now: Self.now + 60).excludes(Self.toto))
    }

    @Test("without budgets nothing is paced: a quota answer slows the sender down as before")
    func unpaced() {
        var machine = Machine(configuration: .init())
        let sends = Self.claim(&machine, 1...3)
        #expect(sends.count == 3)
        machine.sent(sends[0], outcome: .retry(reason: "QUOTA_EXCEEDED", retryAfter: Self.now + 60_000, slowDown: true))
        #expect(machine.decisions(now: Self.now, random: { 0.5 })[0].note == .slowDown(until: Self.now + 60_000))
        #expect(machine.paces.isEmpty)
    }
}
