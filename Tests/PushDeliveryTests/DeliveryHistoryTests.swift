import Foundation
import PushContracts
import PushCore
@testable import PushDelivery
import PushHTTP
import PushStore
import PushTestSupport
import Testing

@Suite("Delivery history: what the dispatcher writes and tells")
struct DeliveryHistoryTests {
    @Test(
        "an outcome's status and reason: the answer's HTTP status, the rest of the classifier's reason, nothing when no answer came",
        arguments: [
            (DeliveryOutcome.delivered(reference: nil, status: 201), 201, nil),
            (.delivered(reference: "m1"), nil, nil),
            (.retry(reason: "HTTP 503 UNAVAILABLE: The service is currently unavailable.", retryAfter: nil, slowDown: false), 503,
             "UNAVAILABLE: The service is currently unavailable."),
            (.revokeDeadToken(reason: "HTTP 410"), 410, nil),
            (.pause(reason: "HTTP 403 (the push service refuses our VAPID credentials)"), 403, "(the push service refuses our VAPID credentials)"),
            (.retry(reason: "connection refused", retryAfter: nil, slowDown: false), nil, "connection refused"),
            (.pause(reason: "access token refused: HTTP 400 invalid_grant"), nil, "access token refused: HTTP 400 invalid_grant"),
            (.retry(reason: "HTTP 50", retryAfter: nil, slowDown: false), nil, "HTTP 50"),
            (.retry(reason: "HTTP 5030", retryAfter: nil, slowDown: false), nil, "HTTP 5030"),
            (.failed(reason: ""), nil, nil),
        ] as [(DeliveryOutcome, Int?, String?)])
    func outcomeFields(outcome: DeliveryOutcome, status: Int?, detail: String?) {
        #expect(outcome.status == status)
        #expect(outcome.detail == detail)
    }

    @Test("every classified answer reports the status it came with", arguments: [200, 201, 400, 401, 403, 404, 410, 413, 429, 500, 503])
    func classifiedStatus(status: Int) {
        let answer = ProviderAnswer(status: status, body: Array(#"{"error":{"status":"UNAVAILABLE","message":"x"},"reason":"BadDeviceToken"}"#.utf8))
        for outcome in [
            AnswerClassifier.fcm(answer, now: 0), AnswerClassifier.apns(answer, now: 0), AnswerClassifier.webPush(answer, now: 0),
            AnswerClassifier.webhook(answer, now: 0),
        ] {
            #expect(outcome.status == status, "\(outcome)")
        }
    }

    @Test("with the history on, each attempt is stored with its settlement (status, latency, outcome, next time) and told to the feed", .processLevel)
    func written() async throws {
        var configuration = Dispatcher.Configuration(pauseProbe: 30_000)
        configuration.keepsHistory = true
        let h = try await DeliveryHarness(configuration: configuration)
        defer { Task { await h.close() } }
        h.fakes.script("t1", [.recorded("fcm-unavailable"), .normal])
        let subscription = try await h.subscribe(token: "t1")
        let watched = h.dispatcher.feed.watch()
        #expect(h.dispatcher.feed.isWatched)
        h.start()
        try await h.queue(subscription, seq: 7)
        try await h.eventually("the first attempt settled") { try await h.outbox().first?.attempts == 1 }
        try await h.advance(by: 1_000)
        try await h.eventually("the outbox to empty") { try await h.outbox().isEmpty }
        let history = try await h.store.attempts(app: "toto", subscription: subscription.0.id, cursor: nil, limit: 10).items
        #expect(history.map(\.outcome) == [.delivered, .retry])
        #expect(history.map(\.status) == [200, 503])
        #expect(history.map(\.attempt) == [2, 1])
        #expect(history.allSatisfy { $0.seq == 7 && $0.provider == "fcm" && $0.destination == nil && ($0.latencyMs ?? -1) >= 0 })
        #expect(history[1].nextAt == h.base + 1_000 && history[1].reason?.hasPrefix("UNAVAILABLE") == true && history[0].reason == nil)
        var told: [DeliveryAttempt] = []
        for await attempt in watched {
            told.append(attempt)
            if told.count == 2 { break }
        }
        #expect(told.map(\.outcome) == [.retry, .delivered])
    }

    @Test("with the history off, nothing is stored; a watcher still gets the attempts", .processLevel)
    func off() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        let subscription = try await h.subscribe(token: "t1")
        h.start()
        try await h.queue(subscription)
        try await h.eventually("the outbox to empty") { try await h.outbox().isEmpty }
        #expect(try await h.store.attempts(app: "toto", subscription: subscription.0.id, cursor: nil, limit: 10).items.isEmpty)
        let watched = h.dispatcher.feed.watch()
        try await h.queue(subscription, seq: 2)
        for await attempt in watched {
            #expect(attempt.outcome == .delivered && attempt.seq == 2)
            break
        }
        #expect(try await h.store.attempts(app: "toto", subscription: subscription.0.id, cursor: nil, limit: 10).items.isEmpty)
    }

    @Test("a Web Push attempt's destination is the push service's origin; a webhook's its name")
    func destinations() {
        let context = #"{"endpoint":"https://Push.Example.net:8443/s/abc","keys":{"auth":"a","p256dh":"b"}}"#
        let entry = OutboxEntry(
            app: "toto", subscriptionHandle: 1, subscriptionID: "s", kind: .webpush, target: context, destination: nil, notification: .value, payload: [],
            recordSeq: 1)
        #expect(DeliveryAttempt.destination(of: entry) == "https://push.example.net:8443")
        var hook = entry
        hook.kind = .webhook
        hook.destination = "orders"
        #expect(DeliveryAttempt.destination(of: hook) == "orders")
        var fcm = entry
        fcm.kind = .fcm
        #expect(DeliveryAttempt.destination(of: fcm) == nil)
    }
}
