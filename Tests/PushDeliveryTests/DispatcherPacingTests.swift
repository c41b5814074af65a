import Foundation
import PushContracts
import PushCore
@testable import PushDelivery
import PushFakes
import PushJSON
import Testing

/// Pacing end to end in one process (issue 34): the real dispatcher and SQLite outbox, the fake
/// FCM with a quota, the service clock moved by the test.
@Suite("Delivery: pacing to a provider's quota")
struct DispatcherPacingTests {
    @Test("a burst of 20 × the quota to an FCM that refuses beyond it goes at about the quota: under 1 % refused after the first second, nothing discarded, order per subscription kept")
    func burstToQuota() async throws {
        let quota = 25
        // FCM's default budget (600,000 a minute), far above this project's real quota.
        var configuration = Dispatcher.Configuration(perProvider: 1_024, perApp: 1_024, pauseProbe: 30_000)
        configuration.machine.pacing = PacingTable(byKind: [.fcm: PacingTable.fcmDefault])
        let h = try await DeliveryHarness(configuration: configuration)
        defer { Task { await h.close() } }
        h.fakes.setQuota(fcm: quota)
        h.fakes.keepReceived(true)
        // 250 subscriptions, two notifications each (child events: they do not coalesce): 500
        // = 20 × the quota, in one commit.
        var subscriptions: [(Subscription, Int64)] = []
        for index in 0..<250 { subscriptions.append(try await h.subscribe(token: "t\(index)", path: "/p\(index)")) }
        var batch = CommitBatch(now: h.now())
        for round in 1...2 {
            for (subscription, handle) in subscriptions {
                batch.operations.append(
                    .notify(
                        OutboxEntry(
                            app: "toto", subscriptionHandle: handle, subscriptionID: subscription.id, kind: .fcm, target: subscription.tuple.context,
                            destination: nil, notification: .childEvent, payload: Array(#"{"s":"OK","t":"childEvent","n":"\#(round)"}"#.utf8), recordSeq: Int64(round))))
            }
        }
        _ = try await h.store.commit(batch)
        let total = 20 * quota
        h.start()
        // The clock moves 10 ms at a time, each time every send was answered and the dispatcher
        // waits for the clock (the provider answers within the millisecond; idle at the end).
        func deliveredCount() -> Int { h.sends("fcm").filter { $0.status == 200 }.count }
        var elapsed: Int64 = 0
        while deliveredCount() < total && elapsed < 60_000 {
            try await h.eventually("the dispatcher to sleep") {
                (h.dispatcher.asleep && h.clock.sleeperCount >= 1 && h.dispatcher.state.withLock { $0.machine.nothingSending && !$0.machine.hasAnswers }) || deliveredCount() >= total
            }
            h.clock.advance(by: .milliseconds(10))
            elapsed += 10
        }
        let sends = h.sends("fcm")
        let delivered = sends.filter { $0.status == 200 }
        #expect(delivered.count == total)
        // About the quota: the ideal is 20 s.
        let last = (delivered.map(\.at).max() ?? h.base) - h.base
        #expect(last <= 24_000, "the last delivered at \(last) ms")
        let later = sends.filter { $0.at - h.base >= 1_000 }
        let refusedLater = later.filter { $0.status == 429 }.count
        #expect(Double(refusedLater) < 0.01 * Double(later.count), "\(refusedLater) of \(later.count) refused after the first second")
        // Nothing discarded, nothing left; each subscription's two in order.
        try await h.eventually("the outbox to empty") { try await h.outbox().isEmpty }
        var seen: [String: [String]] = [:]
        for send in delivered {
            let n = (try? JSONParser.parse(send.data))?["n"]?.stringValue ?? "?"
            seen[send.target, default: []].append(n)
        }
        #expect(seen.count == 250)
        #expect(seen.values.allSatisfy { $0 == ["1", "2"] })
        #expect(h.counters.deliveries(provider: "fcm", outcome: "discarded") == 0)
        // What the overview shows: the quota answers, and the sends pacing held back.
        let pace = h.dispatcher.paces[SenderKey(app: "toto", kind: .fcm)]
        #expect(pace?.refusals == sends.filter { $0.status == 429 }.count)
        #expect((pace?.waited ?? 0) > 400)
        #expect(h.counters.pacingRefusals(provider: "fcm") == pace?.refusals)
    }
}
