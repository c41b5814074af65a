import Foundation
import Logging
import PushCore
import PushContracts
import PushJSON
@testable import PushDelivery
import PushHTTP
import PushJOSE
import PushStore
import PushFakes
import PushTestSupport
import Synchronization
import Testing

/// Pauses and their probes, order per subscription, restarts, store faults around claims and
/// settlements, webhooks, losses in transit, HTTPS.
extension DispatcherTests {
    @Test("a paused application keeps a retry window of notifications, counted from their creation: the outbox stays bounded")
    func pausedOutboxBounded() async throws {
        let h = try await DeliveryHarness(configuration: .init(retry: RetryPolicy(window: 10_000), pauseProbe: 30_000))
        defer { Task { await h.close() } }
        h.fakes.script("t1", Array(repeating: .recorded("fcm-third-party-auth"), count: 50))
        let subscription = try await h.subscribe(token: "t1", mode: .childEvent)
        let fcm = SenderKey(app: "toto", kind: .fcm)
        h.start()
        try await h.queue(subscription, .childEvent, seq: 1)
        try await h.eventually("the pause") { h.dispatcher.paused[fcm] != nil }
        // Two simulated minutes of writes, one a second, while the application stays paused
        // (every probe refused): childEvent notifications never merge.
        var depths: [Int] = []
        for second in 2...120 {
            try await h.advance(by: 1_000)
            try await h.queue(subscription, .childEvent, seq: Int64(second))
            try await h.eventually("the write seen") { h.dispatcher.asleep && h.clock.sleeperCount >= 1 }
            depths.append(try await h.outbox().count)
        }
        #expect(h.dispatcher.paused[fcm] != nil, "the probes were refused: still paused")
        // The window (10 s) of writes, plus the second the sweep may lag: never the 120 written.
        #expect(depths.max()! <= 13, "outbox depths while paused: \(depths)")
        #expect(try await h.outbox().count >= 9, "what the window keeps is kept")
        #expect(h.dispatcher.counters.deliveries(provider: "fcm", outcome: "discarded") >= 100)
        #expect(try await h.store.subscription(id: subscription.0.id) != nil, "a discard keeps the subscription")
        #expect(h.dispatcher.counters.deliveries(provider: "fcm", outcome: "revoked") == 0)
    }

    @Test("OAuth invalid_grant pauses the application too")
    func oauthFault() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        h.fakes.setOAuthFault(google: .recorded("google-invalid-grant"), hms: nil)
        let subscription = try await h.subscribe(token: "t1")
        h.start()
        try await h.queue(subscription)
        try await h.eventually("the pause") { !h.dispatcher.paused.isEmpty }
        #expect(h.dispatcher.paused[SenderKey(app: "toto", kind: .fcm)]?.reason.contains("invalid_grant") == true)
        #expect(try await h.outbox().count == 1)
        h.fakes.setOAuthFault(google: nil, hms: nil)
        try await h.advance(by: 30_000)
        try await h.eventually("delivered") { try await h.outbox().isEmpty }
        #expect(h.sends("fcm").filter { $0.status == 200 }.count == 1)
    }

    @Test("HMS: 80100000 revokes only the illegal token; the form-encoded secret works")
    func hmsPartial() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        let illegal = try await h.subscribe(.hms, token: "illegal-1")
        let good = try await h.subscribe(.hms, token: "good-1", path: "/g")
        h.start()
        try await h.queue(illegal)
        try await h.queue(good)
        try await h.eventually("settled") { try await h.outbox().isEmpty }
        #expect(try await h.store.subscription(id: illegal.0.id) == nil)
        #expect(try await h.store.subscription(id: good.0.id) != nil)
        #expect(h.sends("hms").count == 2)
        let data = try JSONParser.parse(h.sends("hms").first { $0.target == "good-1" }!.data)
        #expect(data["t"]?.stringValue == "value")
    }

    @Test("per subscription, notifications go in order, a retry holding back the ones after it")
    func order() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        h.fakes.script("t1", [.normal, .recorded("fcm-unavailable"), .normal])
        let subscription = try await h.subscribe(token: "t1", mode: .childEvent)
        h.start()
        for seq in 1...5 { try await h.queue(subscription, .childEvent, payload: #"{"n":"\#(seq)"}"#, seq: Int64(seq)) }
        try await h.eventually("the failure") { h.sends("fcm").count == 2 }
        try await Task.sleep(for: .milliseconds(50))
        #expect(h.sends("fcm").count == 2)
        try await h.advance(by: 1_000)
        try await h.eventually("all") { try await h.outbox().isEmpty }
        let order = try h.sends("fcm").map { try JSONParser.parse($0.data)["n"]?.stringValue ?? "" }
        #expect(order == ["1", "2", "2", "3", "4", "5"])
    }

    @Test("a value waiting behind a failed send replaces it; the schedule holds")
    func coalescingDuringBackoff() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        h.fakes.script("t1", [.slow(.milliseconds(200), then: .recorded("fcm-unavailable")), .normal])
        let subscription = try await h.subscribe(token: "t1")
        h.start()
        try await h.queue(subscription, payload: #"{"v":"1"}"#, seq: 1)
        try await h.eventually("in flight") { try await h.outbox().first.map { _ in true } ?? false }
        try await Task.sleep(for: .milliseconds(50))
        try await h.queue(subscription, payload: #"{"v":"2"}"#, seq: 2)
        try await h.queue(subscription, payload: #"{"v":"3"}"#, seq: 3)
        try await h.eventually("the failure settled") {
            let rows = try await h.outbox()
            return rows.count == 1 && rows[0].attempts == 1
        }
        try await h.advance(by: 1_000)
        try await h.eventually("delivered") { try await h.outbox().isEmpty }
        let values = try h.sends("fcm").map { try JSONParser.parse($0.data)["v"]?.stringValue ?? "" }
        #expect(values == ["1", "3"])
    }

    @Test("a restart in the middle of a back-off resumes the retry on time")
    func restartDuringBackoff() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        h.fakes.script("t1", [.recorded("fcm-unavailable"), .recorded("fcm-unavailable"), .normal])
        let subscription = try await h.subscribe(token: "t1")
        h.start()
        try await h.queue(subscription)
        try await h.eventually("first attempt") { h.sends("fcm").count == 1 }
        try await h.advance(by: 1_000)
        try await h.eventually("second attempt settled") { try await h.outbox().first?.attempts == 2 }
        await h.stop()
        h.makeDispatcher()
        h.start()
        try await h.advance(by: 1_999)
        try await Task.sleep(for: .milliseconds(50))
        #expect(h.sends("fcm").count == 2)
        try await h.advance(by: 1)
        try await h.eventually("delivered after the restart") { try await h.outbox().isEmpty }
        #expect(h.sends("fcm").map { $0.at - h.base } == [0, 1_000, 3_000])
    }

    @Test("a settlement the store cannot take is retried until it can: the claim is never left to its lease")
    func settlementRetriedUntilStored() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        let store = SettlementsFailing(h.store)
        h.makeDispatcher(store: store)
        let first = try await h.subscribe(token: "t1")
        h.start()
        try await h.queue(first)
        try await h.eventually("sent") { h.sends("fcm").count == 1 }
        // The database stays away through many attempts (the dispatcher used to give up after
        // five, ~3 s, and leave the notification claimed for its 300 s lease).
        while store.attempts.withLock({ $0 }) < 12 { try await h.advance(by: 2_000) }
        store.failing.withLock { $0 = false }
        // The database is back: the next attempt (if the one under way failed) settles it.
        try await h.eventually("settled") {
            if h.dispatcher.asleep && h.clock.sleeperCount > 0 { h.clock.advance(by: .milliseconds(2_000)) }
            return try await h.outbox().isEmpty
        }
        // The subscription's next notification goes at once, not after a lease.
        try await h.queue(first, payload: #"{"s":"OK","t":"value","n":2}"#, seq: 2)
        try await h.eventually("the next one sent") { h.sends("fcm").count == 2 }
        #expect(h.sends("fcm").count == 2, "nothing sent twice")
    }

    @Test("several instances: a claim is sent only within the tenure its heartbeats give; past it, what was claimed and not started is given back, never sent late (issue 33: the partition test)")
    func claimsSentOnlyWithinTenure() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        let store = SettlementsFailing(h.store, holding: true)
        let tenure = ClaimTenure(staleAfter: 5_000, margin: 1_000)
        tenure.heartbeat(sentAt: h.clock.now)
        // One send at a time for the application: the claimed notifications wait for the slot.
        h.makeDispatcher(configuration: .init(perApp: 1, claimant: "node-2", pauseProbe: 30_000, releaseAllAtStart: false), store: store, tenure: tenure)
        for token in ["t1", "t2", "t3"] { try await h.queue(try await h.subscribe(token: token)) }
        h.start()
        // The first answers are settled into a store that does not answer (cut off): the loop
        // waits there, the last claimed notification still waiting for its slot.
        try await h.eventually("a settlement held") { store.waiting.withLock { $0 } > 0 }
        try await Task.sleep(for: .milliseconds(300))
        let before = h.sends("fcm").count
        #expect(before < 3, "the slot kept one waiting")
        // No heartbeat for 10 s: the others have released this instance's claims and sent them.
        h.clock.advance(by: .milliseconds(10_000))
        store.failing.withLock { $0 = false }
        try await h.eventually("the settlements stored") { store.waiting.withLock { $0 } == 0 }
        try await Task.sleep(for: .milliseconds(500))
        // Before: the waiting one was sent now, after the others had sent it (and what followed).
        #expect(h.sends("fcm").count == before, "nothing started past the tenure")
        // Given back once the store answers (at the dispatcher's next look, a quarter of a
        // second later): another instance can claim what was not sent.
        var taken = 0
        try await h.eventually("given back", timeout: 20) {
            if h.dispatcher.asleep && h.clock.sleeperCount > 0 { h.clock.advance(by: .milliseconds(250)) }
            taken += try await h.store.claim(now: h.clock.now, limit: 10, claimant: "node-1", leaseUntil: h.clock.now + 60_000, excluding: []).count
            return taken == 3 - before
        }
        #expect(h.sends("fcm").count == before, "still nothing sent past the tenure")
        #expect(try await h.store.releaseClaims(claimant: "node-1") == 3 - before)
        // A heartbeat again: the rest is claimed and sent, each notification once.
        tenure.heartbeat(sentAt: h.clock.now)
        h.dispatcher.nudge()
        try await h.eventually("all sent", timeout: 20) {
            if h.dispatcher.asleep && h.clock.sleeperCount > 0 { h.clock.advance(by: .milliseconds(250)) }
            tenure.heartbeat(sentAt: h.clock.now)
            return h.sends("fcm").count == 3
        }
        #expect(Set(h.sends("fcm").map(\.target)) == ["t1", "t2", "t3"])
    }

    @Test("a claim that committed but whose answer was lost is released and sent, not left to its lease")
    func claimAnswerLost() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        let store = FirstClaimAnswerLost(h.store)
        h.makeDispatcher(store: store)
        let first = try await h.subscribe(token: "t1")
        try await h.queue(first)
        h.start()
        // The failed claim waits (on the service clock) before the next attempt.
        try await h.eventually("the lost claim") { store.claims.withLock { $0 } >= 1 }
        // At most 10 s of the service's clock (the lease is 300 s): the claim is released, not lapsed.
        var advanced: Int64 = 0
        try await h.eventually("sent after the failed claim, within 10 s of the service's clock", timeout: 20) {
            if h.dispatcher.asleep && h.clock.sleeperCount > 0 && advanced < 10_000 {
                h.clock.advance(by: .milliseconds(500))
                advanced += 500
            }
            return h.sends("fcm").count == 1
        }
        try await h.eventually("settled") { try await h.outbox().isEmpty }
        #expect(h.sends("fcm").count == 1)
    }

    @Test("what a claim took is sent even when the read after it fails")
    func nextDueFails() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        let store = FirstClaimAnswerLost(h.store, loseFirstClaim: false)
        store.failNextDue.withLock { $0 = true }
        h.makeDispatcher(store: store)
        let first = try await h.subscribe(token: "t1")
        let second = try await h.subscribe(token: "t2")
        try await h.queue(first)
        try await h.queue(second, seq: 2)
        h.start()
        var advanced: Int64 = 0
        try await h.eventually("both sent within 10 s of the service's clock", timeout: 20) {
            if h.dispatcher.asleep && h.clock.sleeperCount > 0 && advanced < 10_000 {
                h.clock.advance(by: .milliseconds(500))
                advanced += 500
            }
            return h.sends("fcm").count == 2
        }
        #expect(!store.failNextDue.withLock { $0 }, "the read after the claim did fail")
    }

    @Test("webhooks: the §8 body with a stable id, signed; a 410 revokes and still sends the revoke")
    func webhooks() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        h.fakes.script("webhook:orders", [.status(500), .normal, .status(410), .normal])
        let hook = try await h.subscribe(.webhook, token: "ctx", path: "/w", mode: .childEvent)
        h.start()
        try await h.queue(hook, .childEvent, payload: #"{"app":"toto","uid":"u1","event":{"t":"child"}}"#)
        try await h.eventually("the 500") { h.sends("webhook").count == 1 }
        try await h.advance(by: 1_000)
        try await h.eventually("delivered") { h.sends("webhook").count == 2 }
        let attempts = h.sends("webhook")
        #expect(attempts[0].headers["webhook-id"] == attempts[1].headers["webhook-id"])
        let body = try JSONParser.parse(attempts[1].data)
        #expect(body["id"]?.stringValue == attempts[1].headers["webhook-id"])
        #expect(body["event"]?["t"]?.stringValue == "child")
        try await h.queue(hook, .childEvent, payload: #"{"app":"toto","event":{"t":"child"}}"#, seq: 2)
        try await h.eventually("revoked") { try await h.store.subscription(id: hook.0.id) == nil }
        try await h.eventually("the revoke sent") { h.sends("webhook").count == 4 }
        #expect(String(decoding: h.sends("webhook")[3].data, as: UTF8.self).contains("revoke"))
        #expect(h.sends("webhook").allSatisfy { $0.status != 401 })
    }

    @Test("a request lost to a reset is resent at once; lost three times, it waits for its back-off", arguments: [false, true])
    func resets(tls: Bool) async throws {
        let h = try await DeliveryHarness(tls: tls)
        defer { Task { await h.close() } }
        h.fakes.script("t1", [.reset, .reset, .normal])
        h.fakes.script("t2", [.reset, .reset, .reset, .normal])
        h.fakes.script("webhook:orders", [.goAway, .normal])
        let first = try await h.subscribe(token: "t1")
        let second = try await h.subscribe(token: "t2", path: "/b")
        let hook = try await h.subscribe(.webhook, token: "", path: "/w")
        h.start()
        try await h.queue(first)
        try await h.queue(second)
        try await h.eventually("t1 delivered") { h.sends("fcm").filter { $0.target == "t1" }.map(\.status) == [0, 0, 200] }
        try await h.eventually("t2 lost three times") { h.sends("fcm").filter { $0.target == "t2" }.map(\.status) == [0, 0, 0] }
        // A GOAWAY (HTTP/2) refuses the stream; alone on its connection, so that no other
        // request is refused with it.
        try await h.eventually("t2 waiting for its retry") { h.counters.deliveries(provider: "fcm", outcome: "retry") == 1 }
        try await h.queue(hook)
        try await h.eventually("the webhook delivered") { h.sends("webhook").map(\.status) == [0, 200] }
        // Resent at once: no time passed on the clock.
        #expect(h.sends("fcm").allSatisfy { $0.at == h.base })
        #expect(h.counters.resends(provider: "fcm") == 4)
        #expect(h.counters.resends(provider: "webhook") == 1)
        try await h.advance(by: 1_000)
        try await h.eventually("t2 delivered after 1 s") { h.sends("fcm").filter { $0.target == "t2" }.map(\.status) == [0, 0, 0, 200] }
        try await h.eventually("the outbox to empty") { try await h.outbox().isEmpty }
        #expect(h.counters.deliveries(provider: "fcm", outcome: "delivered") == 2)
    }

    @Test("HTTPS with HTTP/2 to the fakes, trusting the test CA through caFile")
    func https() async throws {
        let h = try await DeliveryHarness(tls: true)
        defer { Task { await h.close() } }
        let mobile = try await h.subscribe(token: "t1")
        let huawei = try await h.subscribe(.hms, token: "h1", path: "/h")
        h.start()
        try await h.queue(mobile)
        try await h.queue(huawei)
        try await h.eventually("delivered") { try await h.outbox().isEmpty }
        #expect(h.sends("fcm").map(\.status) == [200])
        #expect(h.sends("hms").map(\.status) == [200])
    }
}
