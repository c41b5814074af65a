import Foundation
import Logging
import PushCore
import PushContracts
@testable import PushDelivery
import PushHTTP
import PushJOSE
import PushStore
import PushFakes
import PushTestSupport
import Synchronization
import Testing

@Suite("Delivery against the fake providers", .processLevel, .serialized)
struct DispatcherTests {
    /// Most waits end early (a record's nudge, a send's answer); a timer of their own, started
    /// and cancelled each time, cost about three thread wake-ups a wait. One timer keeps every
    /// deadline now, and never more than one sleeps.
    @Test("one timer keeps the waits' deadlines: it outlives the waits it serves, sleeps on for a later one, is replaced by an earlier one, goes when idle")
    func oneTimer() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        let dispatcher = try #require(h.dispatcher)
        let clock = h.clock
        /// A wait until `deadline` (`nil`: none), once it is registered.
        func waiting(until deadline: Int64?) async throws -> Task<Void, Never> {
            let wait = Task { await dispatcher.waitForWake(until: deadline) }
            try await h.eventually("the wait registered") { dispatcher.state.withLock { $0.waiter != nil } }
            return wait
        }
        // 50 waits for the same deadline, each ended by a nudge: the first one's timer serves all.
        let first = clock.now + 1_000
        for _ in 0..<50 {
            let wait = try await waiting(until: first)
            dispatcher.nudge()
            await wait.value
        }
        try await h.eventually("one timer asleep") { clock.sleeperCount == 1 }
        #expect(dispatcher.armedTimer == first)
        // A later deadline keeps it; when it comes due, it does not end that wait but sleeps on.
        let far = clock.now + 3_600_000
        let farWait = try await waiting(until: far)
        #expect(dispatcher.armedTimer == first)
        clock.advance(by: .milliseconds(1_000))
        try await h.eventually("the timer asleep until the wait's deadline") { dispatcher.armedTimer == far && clock.sleeperCount == 1 }
        #expect(dispatcher.asleep, "the wait went on")
        dispatcher.nudge()
        await farWait.value
        // An earlier deadline replaces it: still one timer, which ends that wait when due.
        let near = clock.now + 10
        let nearWait = try await waiting(until: near)
        #expect(dispatcher.armedTimer == near)
        try await h.eventually("the far timer gone") { clock.sleeperCount == 1 }
        clock.advance(by: .milliseconds(10))
        await nearWait.value
        #expect(dispatcher.armedTimer == nil)
        try await h.eventually("no timer left") { clock.sleeperCount == 0 }
        // Far and near deadlines in turn, the waits ended early: never more than one timer.
        for round in 0..<50 {
            let wait = try await waiting(until: clock.now + (round.isMultiple(of: 2) ? 3_600_000 : 20))
            dispatcher.nudge()
            await wait.value
            try await h.eventually("one timer asleep") { clock.sleeperCount == 1 }
        }
        // Idle (nothing claimed, in flight or to settle), a wait without a deadline cancels it.
        #expect(dispatcher.isIdle)
        let idle = try await waiting(until: nil)
        #expect(dispatcher.armedTimer == nil)
        try await h.eventually("the timer gone") { clock.sleeperCount == 0 }
        dispatcher.nudge()
        await idle.value
    }

    @Test("a recoverable error is retried 1 s, 2 s, 4 s after, then delivered; the subscription stays")
    func schedule() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        h.fakes.script("t1", [.recorded("fcm-unavailable"), .recorded("fcm-internal"), .status(502, body: "<html>Error 502 (Server Error)!!1</html>"), .normal])
        let subscription = try await h.subscribe(token: "t1")
        h.start()
        try await h.queue(subscription)
        try await h.eventually("first attempt") { h.sends("fcm").count == 1 }
        for (count, delay) in [(2, Int64(1_000)), (3, 2_000), (4, 4_000)] {
            // Just before the due time nothing is sent.
            try await h.advance(by: delay - 1)
            try await Task.sleep(for: .milliseconds(30))
            #expect(h.sends("fcm").count == count - 1)
            try await h.advance(by: 1)
            try await h.eventually("attempt \(count)") { h.sends("fcm").count == count }
        }
        let times = h.sends("fcm").map { $0.at - h.base }
        #expect(times == [0, 1_000, 3_000, 7_000])
        try await h.eventually("the outbox to empty") { try await h.outbox().isEmpty }
        #expect(try await h.store.subscription(id: subscription.0.id) != nil)
        #expect(h.dispatcher.counters.deliveries(provider: "fcm", outcome: "delivered") == 1)
        #expect(h.dispatcher.counters.deliveries(provider: "fcm", outcome: "retry") == 3)
    }

    @Test("jitter spreads each delay within ±20 %", arguments: [0.0, 0.999])
    func jitter(random: Double) async throws {
        let h = try await DeliveryHarness(random: random)
        defer { Task { await h.close() } }
        h.fakes.script("t1", [.recorded("fcm-unavailable"), .recorded("fcm-unavailable"), .normal])
        let subscription = try await h.subscribe(token: "t1")
        h.start()
        try await h.queue(subscription)
        try await h.eventually("first attempt") { h.sends("fcm").count == 1 }
        var expected: [Int64] = [0]
        for delay in [Int64(1_000), 2_000] {
            let jittered = Int64(Double(delay) * (1 + 0.2 * (2 * random - 1)))
            #expect(jittered >= delay * 8 / 10 && jittered <= delay * 12 / 10)
            try await h.advance(by: jittered)
            try await h.eventually("attempt") { h.sends("fcm").count == expected.count + 1 }
            expected.append(expected.last! + jittered)
        }
        #expect(h.sends("fcm").map { $0.at - h.base } == expected)
    }

    @Test("Retry-After in seconds slows the whole application; an HTTP date is honoured too")
    func retryAfter() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        h.fakes.script("t1", [.recorded("fcm-quota-exceeded"), .normal])
        let first = try await h.subscribe(token: "t1")
        let second = try await h.subscribe(token: "t2", path: "/b")
        h.start()
        try await h.queue(first)
        try await h.eventually("the 429") { h.sends("fcm").count == 1 }
        try await h.eventually("the retry to be settled") { try await h.outbox().first?.attempts == 1 }
        // Another subscription of the application waits for the quota too.
        try await h.queue(second)
        try await Task.sleep(for: .milliseconds(50))
        #expect(h.sends("fcm").count == 1)
        try await h.advance(by: 59_999)
        try await Task.sleep(for: .milliseconds(50))
        #expect(h.sends("fcm").count == 1)
        try await h.advance(by: 1)
        try await h.eventually("both sent after a minute") { h.sends("fcm").filter { $0.status == 200 }.count == 2 }
        #expect(h.sends("fcm").allSatisfy { $0.at - h.base == 0 || $0.at - h.base == 60_000 })

        // A webhook answering 503 with an HTTP date.
        let hook = try await h.subscribe(.webhook, token: "ctx", path: "/w")
        let date = RetryAfter.format(seconds: (h.now() + 90_000) / 1000)
        h.fakes.script("webhook:orders", [.status(503, body: "", retryAfter: date), .normal])
        try await h.queue(hook, payload: #"{"app":"toto","event":{"t":"value"}}"#)
        try await h.eventually("the webhook's 503") { h.sends("webhook").count == 1 }
        let sentAt = h.sends("webhook")[0].at
        try await h.advance(by: 80_000)
        try await Task.sleep(for: .milliseconds(50))
        #expect(h.sends("webhook").count == 1)
        try await h.advance(by: 10_000)
        try await h.eventually("the webhook's retry") { h.sends("webhook").count == 2 }
        #expect(h.sends("webhook")[1].at >= (sentAt / 1000 + 90) * 1000 - 1000)
    }

    @Test("after 2 hours of failures the waiting notifications are discarded and the subscription kept")
    func discard() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        h.fakes.script("t1", Array(repeating: .recorded("fcm-unavailable"), count: 40))
        let subscription = try await h.subscribe(token: "t1", mode: .childEvent)
        h.start()
        try await h.queue(subscription, .childEvent, seq: 1)
        try await h.queue(subscription, .childEvent, seq: 2)
        try await h.eventually("first attempt") { h.sends("fcm").count == 1 }
        var attempts = 1
        while true {
            // Each answer settled before the clock moves: rescheduled, or the whole lot discarded.
            try await h.eventually("the answer settled") {
                let rows = try await h.outbox()
                return rows.isEmpty || rows[0].attempts == h.sends("fcm").count
            }
            if try await h.outbox().isEmpty { break }
            try await h.advance(by: 1_000 << min(attempts - 1, 20))
            try await h.eventually("attempt \(attempts + 1)") { h.sends("fcm").count == attempts + 1 }
            attempts += 1
            #expect(attempts < 30)
        }
        // 1+2+4+…+4096 s: 13 attempts fit in 2 h (the 14th would come at 8191 s > 7200 s).
        #expect(attempts == 13)
        #expect(h.sends("fcm").last!.at - h.base <= 7_200_000)
        #expect(try await h.store.subscription(id: subscription.0.id) != nil)
        // Both notifications are discarded and counted: the one tried and the one behind it.
        #expect(h.dispatcher.counters.deliveries(provider: "fcm", outcome: "discarded") == 2)
    }

    @Test("UNREGISTERED deletes the subscription and sends it no revoke; another fatal answer sends one")
    func revocations() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        let dead = try await h.subscribe(token: "unregistered-1")
        let refused = try await h.subscribe(token: "t2", path: "/b")
        h.fakes.script("t2", [.status(413, body: #"{"error":{"code":413,"message":"too large","status":"FAILED_PRECONDITION"}}"#), .normal])
        h.start()
        try await h.queue(dead)
        try await h.queue(refused)
        try await h.eventually("both revoked") {
            let first = try await h.store.subscription(id: dead.0.id)
            let second = try await h.store.subscription(id: refused.0.id)
            return first == nil && second == nil
        }
        // The refused one gets its revoke notification; the dead token nothing more.
        try await h.eventually("the revoke notification") { h.sends("fcm").filter { $0.target == "t2" }.count == 2 }
        try await h.eventually("the outbox to empty") { try await h.outbox().isEmpty }
        #expect(h.sends("fcm").filter { $0.target == "unregistered-1" }.count == 1)
        let revoke = h.sends("fcm").filter { $0.target == "t2" }[1]
        #expect(String(decoding: revoke.data, as: UTF8.self).contains("delivery_rejected"))
        #expect(h.dispatcher.counters.deliveries(provider: "fcm", outcome: "revoked") == 2)
        let changes = try await h.store.changes(after: 0, limit: 100)
        #expect(changes.filter { $0.operation == .delete }.count == 2)
    }

    @Test("our access token refused: one refresh shared by every waiting send, and each resent at once")
    func tokenRefresh() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        var subscriptions: [(Subscription, Int64)] = []
        for index in 0..<20 { subscriptions.append(try await h.subscribe(token: "t\(index)", path: "/p\(index)")) }
        h.start()
        try await h.queue(subscriptions[0])
        try await h.eventually("the first delivery") { h.sends("fcm").filter { $0.status == 200 }.count == 1 }
        #expect(h.fakes.tokensIssued == 1)
        h.fakes.expireAccessTokens()
        for subscription in subscriptions.dropFirst() { try await h.queue(subscription) }
        try await h.eventually("every delivery") { h.sends("fcm").filter { $0.status == 200 }.count == 20 }
        #expect(h.fakes.tokensIssued == 2)
        #expect(h.fakes.received(provider: "google-oauth").count == 2)
        // No retry was scheduled: the refused sends went again at once.
        #expect(h.dispatcher.counters.retries(provider: "fcm") == 0)
        #expect(h.sends("fcm").allSatisfy { $0.at == h.base })
    }

    /// With an access token at hand, FCM sends over HTTP/2 start with callbacks alone (no
    /// task per send): what comes back goes on exactly as in a task: refusals of the token
    /// (one refresh, each resent at once), resets (two resends at once, then the back-off),
    /// GOAWAY (resent at once).
    @Test("sends started without a task: a refused token, resets and GOAWAY go on as they do in a task")
    func startedWithoutTask() async throws {
        let h = try await DeliveryHarness(tls: true)
        defer { Task { await h.close() } }
        var subscriptions: [(Subscription, Int64)] = []
        for index in 0..<12 { subscriptions.append(try await h.subscribe(token: "t\(index)", path: "/p\(index)")) }
        h.start()
        try await h.queue(subscriptions[0])
        try await h.eventually("the first delivery (it fetches the token)") { h.sends("fcm").filter { $0.status == 200 }.count == 1 }
        #expect(h.dispatcher.startedWithoutTask.load(ordering: .relaxed) == 0)
        // The token refused: one refresh for every send that saw it, each resent at once.
        h.fakes.expireAccessTokens()
        for subscription in subscriptions[1..<9] { try await h.queue(subscription) }
        try await h.eventually("the refused ones delivered") { h.sends("fcm").filter { $0.status == 200 }.count == 9 }
        #expect(h.fakes.tokensIssued == 2)
        #expect(h.dispatcher.counters.retries(provider: "fcm") == 0)
        // The first ones claimed went with the token at hand (those claimed during the
        // refresh wait for it in a task).
        #expect(h.dispatcher.startedWithoutTask.load(ordering: .relaxed) >= 1)
        // Lost in transit: resent at once twice, then the back-off.
        h.fakes.script("t9", [.reset, .reset, .normal])
        h.fakes.script("t10", [.reset, .reset, .reset, .normal])
        h.fakes.script("t11", [.goAway, .normal])
        let before = h.dispatcher.startedWithoutTask.load(ordering: .relaxed)
        try await h.queue(subscriptions[9])
        try await h.queue(subscriptions[10])
        try await h.eventually("t9 delivered, t10 lost three times") {
            h.sends("fcm").filter { $0.target == "t9" }.map(\.status) == [0, 0, 200]
                && h.sends("fcm").filter { $0.target == "t10" }.map(\.status) == [0, 0, 0]
        }
        try await h.eventually("t10 waiting for its retry") { h.counters.deliveries(provider: "fcm", outcome: "retry") == 1 }
        // A GOAWAY refuses the stream; alone on its connection, so that no other request is
        // refused with it.
        try await h.queue(subscriptions[11])
        try await h.eventually("t11 delivered") { h.sends("fcm").filter { $0.target == "t11" }.map(\.status) == [0, 200] }
        #expect(h.dispatcher.startedWithoutTask.load(ordering: .relaxed) == before + 3)
        #expect(h.sends("fcm").allSatisfy { $0.at == h.base })
        try await h.advance(by: 1_000)
        try await h.eventually("t10 delivered after 1 s") { h.sends("fcm").filter { $0.target == "t10" }.map(\.status) == [0, 0, 0, 200] }
        try await h.eventually("the outbox to empty") { try await h.outbox().isEmpty }
        #expect(h.counters.deliveries(provider: "fcm", outcome: "delivered") == 12)
    }

    @Test("THIRD_PARTY_AUTH_ERROR pauses the application's FCM sender, revokes nothing, and it resumes when sends work again")
    func pause() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        h.fakes.script("t1", [.recorded("fcm-third-party-auth"), .recorded("fcm-third-party-auth"), .normal])
        let first = try await h.subscribe(token: "t1")
        let other = try await h.subscribe(token: "t2", path: "/o")
        let huawei = try await h.subscribe(.hms, token: "h1", path: "/h")
        let fcm = SenderKey(app: "toto", kind: .fcm)
        h.start()
        try await h.queue(first)
        try await h.eventually("the pause") { h.dispatcher.paused[fcm] != nil }
        #expect(h.dispatcher.paused[fcm]?.reason.contains("THIRD_PARTY_AUTH_ERROR") == true)
        #expect(h.dispatcher.pausedApplications == ["toto"])
        // Nothing goes to FCM for the application while it is paused; its HMS sender goes on.
        try await h.queue(other)
        try await h.queue(huawei)
        try await h.eventually("the HMS delivery") { h.sends("hms").filter { $0.status == 200 }.count == 1 }
        try await Task.sleep(for: .milliseconds(50))
        #expect(h.sends("fcm").count == 1)
        #expect(h.dispatcher.paused[fcm] != nil)
        #expect(try await h.store.subscription(id: first.0.id) != nil)
        // A probe after 30 s: t1 is refused again, t2 goes through. Whichever answer is settled
        // last decides whether the sender is paused for another 30 s; then everything goes.
        try await h.advance(by: 30_000)
        try await h.eventually("the second probe") {
            if h.sends("fcm").filter({ $0.target == "t1" }).count >= 2 { return true }
            // On a loaded machine the clock may have moved before the dispatcher slept until
            // its probe: move it again once it sleeps, paused.
            if h.dispatcher.paused[fcm] != nil && h.dispatcher.isIdle && h.dispatcher.asleep && h.clock.sleeperCount >= 1 { h.clock.advance(by: .milliseconds(30_000)) }
            return false
        }
        try await h.eventually("delivered") {
            if try await h.outbox().isEmpty { return true }
            // Still paused and asleep until the next probe: move the clock to it.
            if h.dispatcher.paused[fcm] != nil && h.dispatcher.isIdle && h.dispatcher.asleep && h.clock.sleeperCount >= 1 { h.clock.advance(by: .milliseconds(30_000)) }
            return false
        }
        #expect(h.dispatcher.paused.isEmpty)
        #expect(h.sends("fcm").filter { $0.status == 200 }.count == 2)
        let kept = try await h.store.subscription(id: first.0.id)
        let keptToo = try await h.store.subscription(id: other.0.id)
        #expect(kept != nil && keptToo != nil)
        #expect(h.dispatcher.counters.deliveries(provider: "fcm", outcome: "revoked") == 0)
    }
}
