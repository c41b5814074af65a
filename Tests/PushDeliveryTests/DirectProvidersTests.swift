import Crypto
import Foundation
import PushCore
import PushContracts
import PushJSON
@testable import PushDelivery
import PushJOSE
import PushStore
import PushFakes
import PushTestSupport
import Testing

/// APNs and Web Push (issue 24) through the dispatcher, from a real SQLite outbox, over the
/// HTTP/2 transport, to the fakes (which check every request as the real services do): every
/// row of the answer tables, the provider token's renewal, what the push services receive.
@Suite("Direct APNs and Web Push against the fakes", .processLevel, .serialized)
struct DirectProvidersTests {
    /// What a row's first answer must lead to.
    enum Expected: Sendable, CustomStringConvertible {
        /// Delivered (by the fake's own checks, no script).
        case delivered
        /// Retried with back-off, then delivered; `slowDown`: the application's sender waits too.
        case retried(slowDown: Bool)
        /// The subscription deleted, nothing more sent to it.
        case revokedDeadToken
        /// The subscription deleted, one revoke notification attempted.
        case revokedWithNotice
        /// The application's sender for the kind paused; nothing revoked.
        case paused
        /// The notification dropped as a defect of ours; the subscription kept.
        case failed

        var description: String {
            switch self {
            case .delivered: "delivered"
            case .retried(let slowDown): slowDown ? "retried, sender slowed" : "retried"
            case .revokedDeadToken: "revoked (dead token)"
            case .revokedWithNotice: "revoked with notice"
            case .paused: "paused"
            case .failed: "failed (dropped)"
            }
        }
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var fixture: String
        var expected: Expected
        var testDescription: String { "\(fixture) → \(expected)" }
    }

    /// `reference/apns-webpush.md` §1.4, as docs/decisions.md settles it.
    static let apnsRows: [Row] = [
        Row(fixture: "apns-bad-device-token", expected: .revokedDeadToken),
        Row(fixture: "apns-device-token-not-for-topic", expected: .revokedDeadToken),
        Row(fixture: "apns-unregistered", expected: .revokedDeadToken),
        Row(fixture: "apns-expired-token", expected: .revokedDeadToken),
        Row(fixture: "apns-topic-disallowed", expected: .paused),
        Row(fixture: "apns-invalid-provider-token", expected: .paused),
        Row(fixture: "apns-missing-provider-token", expected: .paused),
        Row(fixture: "apns-bad-path", expected: .paused),
        // A fresh token refused as expired is not renewed (20 minutes at least): the sends wait.
        Row(fixture: "apns-expired-provider-token", expected: .retried(slowDown: true)),
        Row(fixture: "apns-unrelated-key-id-in-token", expected: .retried(slowDown: false)),
        Row(fixture: "apns-too-many-requests", expected: .retried(slowDown: false)),
        Row(fixture: "apns-too-many-provider-token-updates", expected: .retried(slowDown: true)),
        Row(fixture: "apns-internal-server-error", expected: .retried(slowDown: false)),
        Row(fixture: "apns-service-unavailable", expected: .retried(slowDown: false)),
        Row(fixture: "apns-payload-too-large", expected: .failed),
        Row(fixture: "apns-bad-priority", expected: .failed),
        Row(fixture: "apns-bad-collapse-id", expected: .failed),
        Row(fixture: "apns-bad-expiration-date", expected: .failed),
        Row(fixture: "apns-invalid-push-type", expected: .failed),
        Row(fixture: "apns-missing-topic", expected: .failed),
        Row(fixture: "apns-payload-empty", expected: .failed),
        Row(fixture: "apns-success", expected: .delivered),
    ]

    /// RFC 8030 and the push services' practice (`reference/apns-webpush.md` §2).
    static let webPushRows: [Row] = [
        Row(fixture: "webpush-created", expected: .delivered),
        Row(fixture: "webpush-gone", expected: .revokedDeadToken),
        Row(fixture: "webpush-not-found", expected: .revokedDeadToken),
        Row(fixture: "webpush-too-large", expected: .failed),
        Row(fixture: "webpush-missing-ttl", expected: .failed),
        // One subscription refused is retried alone: the push service is paused once three
        // different ones are (``webPushOriginPause()``; issue 33).
        Row(fixture: "webpush-bad-jwt", expected: .retried(slowDown: false)),
        Row(fixture: "webpush-unauthorized", expected: .retried(slowDown: false)),
        Row(fixture: "webpush-rate-limited", expected: .retried(slowDown: true)),
        Row(fixture: "webpush-server-error", expected: .retried(slowDown: false)),
        Row(fixture: "webpush-unavailable", expected: .retried(slowDown: false)),
    ]

    static let device = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"

    /// Subscribes (APNs: the device token; Web Push: a browser subscription the fake made),
    /// scripts the first answer, queues one notification and checks the row's outcome.
    func check(_ row: Row, kind: SubscriptionKind) async throws {
        let h = try await DeliveryHarness(tls: true)
        defer { Task { await h.close() } }
        let context = kind == .apns ? Self.device : h.fakes.webPushSubscription("browser")
        let target = kind == .apns ? Self.device : "browser"
        let provider = Provider(kind).label
        if row.expected.isDeliveredAtOnce == false { h.fakes.script(target, [.recorded(row.fixture), .normal]) }
        let subscription = try await h.subscribe(kind, token: context)
        h.start()
        try await h.queue(subscription)
        let sends = { h.sends(provider).filter { $0.target == target } }
        try await h.eventually("the first answer") { !sends().isEmpty && h.dispatcher.isIdle }
        let kept = try await h.store.subscription(id: subscription.0.id) != nil
        let sender = SenderKey(app: "toto", kind: kind, destination: kind == .webpush ? WebPushContext.origin(ofEndpoint: h.fakes.webPushOrigin) : nil)
        switch row.expected {
        case .delivered:
            try await h.eventually("the outbox to empty") { try await h.outbox().isEmpty }
            #expect(sends().map(\.status) == [kind == .apns ? 200 : 201] && kept)
            #expect(h.counters.deliveries(provider: provider, outcome: "delivered") == 1)
        case .retried(let slowDown):
            #expect(kept && sends().count == 1, "\(sends().map(\.status)), resent \(h.counters.resends(provider: provider))")
            #expect((h.dispatcher.slowedDown[sender] != nil) == slowDown, "\(h.dispatcher.slowedDown)")
            try await h.eventually("the retry") {
                if sends().count >= 2 { return true }
                if h.dispatcher.isIdle && h.dispatcher.asleep && h.clock.sleeperCount >= 1 { h.clock.advance(by: .seconds(2)) }
                return false
            }
            try await h.eventually("the outbox to empty") { try await h.outbox().isEmpty }
            #expect(sends().last?.status == (kind == .apns ? 200 : 201))
            #expect(h.counters.retries(provider: provider) >= 1)
        case .revokedDeadToken:
            try await h.eventually("the revocation (sent \(sends().map(\.status)), resent \(h.counters.resends(provider: provider)))", timeout: 20) {
                try await h.store.subscription(id: subscription.0.id) == nil
            }
            try await h.eventually("the outbox to empty") { try await h.outbox().isEmpty }
            #expect(sends().count == 1, "nothing more to a dead token")
            #expect(h.counters.deliveries(provider: provider, outcome: "revoked") == 1)
        case .revokedWithNotice:
            try await h.eventually("the revocation") { try await h.store.subscription(id: subscription.0.id) == nil }
            try await h.eventually("the revoke notification") { sends().count == 2 }
        case .paused:
            try await h.eventually("the pause", timeout: 20) { h.dispatcher.paused[sender] != nil }
            #expect(kept && sends().count == 1)
            #expect(try await h.outbox().count == 1, "the notification waits while paused")
            #expect(h.counters.deliveries(provider: provider, outcome: "revoked") == 0)
        case .failed:
            try await h.eventually("the outbox to empty") { try await h.outbox().isEmpty }
            #expect(kept && sends().count == 1, "\(sends().map(\.status))")
            #expect(h.counters.deliveries(provider: provider, outcome: "failed") == 1, "\(sends().map(\.status))")
        }
    }

    @Test("Web Push: three different subscriptions refused (403 BadJwtToken) pause that push service, nothing revoked; a fourth waits (issue 33)")
    func webPushOriginPause() async throws {
        let h = try await DeliveryHarness(tls: true)
        defer { Task { await h.close() } }
        var subscriptions: [(Subscription, Int64)] = []
        for index in 0..<4 {
            let name = "browser-\(index)"
            h.fakes.script(name, Array(repeating: .recorded("webpush-bad-jwt"), count: 10))
            subscriptions.append(try await h.subscribe(.webpush, token: h.fakes.webPushSubscription(name), path: "/w\(index)"))
        }
        let origin = SenderKey(app: "toto", kind: .webpush, destination: try #require(WebPushContext.origin(ofEndpoint: h.fakes.webPushOrigin)))
        h.start()
        for subscription in subscriptions.prefix(3) { try await h.queue(subscription) }
        try await h.eventually("the push service paused", timeout: 20) { h.dispatcher.paused[origin] != nil }
        #expect(h.dispatcher.pausedApplications.isEmpty, "the application's own credentials are not in question")
        try await h.queue(subscriptions[3])
        try await h.eventually("settled") { h.dispatcher.isIdle }
        try await Task.sleep(for: .milliseconds(300))
        #expect(!h.sends("webpush").contains { $0.target == "browser-3" }, "held while its push service is paused")
        for subscription in subscriptions { #expect(try await h.store.subscription(id: subscription.0.id) != nil) }
        #expect(h.counters.deliveries(provider: "webpush", outcome: "revoked") == 0)
    }

    @Test("APNs: each answer of the table", arguments: apnsRows)
    func apnsAnswers(row: Row) async throws {
        try await check(row, kind: .apns)
    }

    @Test("Web Push: each answer of the table", arguments: webPushRows)
    func webPushAnswers(row: Row) async throws {
        try await check(row, kind: .webpush)
    }

    /// The `iat` of the provider token an APNs request carried.
    static func issuedAt(_ received: FakeProviders.Received) throws -> Int64 {
        let jwt = try #require(received.headers["authorization"]?.dropFirst("bearer ".count))
        let claims = try JSONParser.parse(try #require(Base64URL.decode(String(jwt.split(separator: ".")[1]))))
        return try #require(claims["iat"]?.integerValue)
    }

    @Test("APNs provider token: one for every send, renewed at 50 minutes, and on ExpiredProviderToken once 20 minutes old; never more often")
    func providerToken() async throws {
        let h = try await DeliveryHarness(tls: true)
        defer { Task { await h.close() } }
        var subscriptions: [(Subscription, Int64)] = []
        for index in 0..<6 {
            subscriptions.append(try await h.subscribe(.apns, token: String(format: "%064x", index + 1), path: "/p\(index)"))
        }
        h.start()
        func deliver(_ index: Int) async throws -> FakeProviders.Received {
            let target = String(format: "%064x", index + 1)
            try await h.queue(subscriptions[index])
            try await h.eventually("delivery \(index)") { h.sends("apns").contains { $0.target == target && $0.status == 200 } }
            return try #require(h.sends("apns").last { $0.target == target && $0.status == 200 })
        }
        let start = h.clock.now / 1_000
        let first = try await deliver(0)
        #expect(try Self.issuedAt(first) == start)
        h.clock.advance(by: .seconds(30 * 60))
        #expect(try Self.issuedAt(try await deliver(1)) == start, "the same token at 30 minutes")
        h.clock.advance(by: .seconds(21 * 60))
        let renewedAt = try Self.issuedAt(try await deliver(2))
        #expect(renewedAt == start + 51 * 60, "a new token once 50 minutes old")

        // APNs says the token expired 5 minutes after it was made: too young to renew (APNs
        // would answer TooManyProviderTokenUpdates); the application's APNs sends wait.
        h.clock.advance(by: .seconds(5 * 60))
        let young = String(format: "%064x", 4)
        h.fakes.script(young, [.recorded("apns-expired-provider-token"), .normal])
        try await h.queue(subscriptions[3])
        try await h.eventually("the refusal") { h.sends("apns").contains { $0.target == young } && h.dispatcher.isIdle }
        #expect(h.sends("apns").filter { $0.target == young }.count == 1)
        #expect(h.dispatcher.slowedDown[SenderKey(app: "toto", kind: .apns)] != nil)
        try await h.eventually("the retry") {
            if h.sends("apns").contains(where: { $0.target == young && $0.status == 200 }) { return true }
            if h.dispatcher.isIdle && h.dispatcher.asleep && h.clock.sleeperCount >= 1 { h.clock.advance(by: .seconds(2)) }
            return false
        }
        #expect(try Self.issuedAt(try #require(h.sends("apns").last { $0.target == young })) == renewedAt)

        // Once 20 minutes old, ExpiredProviderToken renews it once and the send goes again at once.
        h.clock.advance(by: .seconds(20 * 60))
        let old = String(format: "%064x", 5)
        h.fakes.script(old, [.recorded("apns-expired-provider-token"), .normal])
        let retriesBefore = h.counters.retries(provider: "apns")
        let resent = try await deliver(4)
        #expect(try Self.issuedAt(resent) > renewedAt)
        #expect(h.sends("apns").filter { $0.target == old }.count == 2)
        #expect(h.counters.retries(provider: "apns") == retriesBefore, "resent at once, not after a back-off")
        #expect(h.sends("apns").allSatisfy { $0.status != 429 }, "never renewed too often")
        // Every token the fake saw was one of three.
        let tokens = Set(h.sends("apns").compactMap { $0.headers["authorization"] })
        #expect(tokens.count == 3)
    }

    @Test("APNs: what the fake received is a background push with the data map beside aps, the headers APNs requires")
    func apnsRequest() async throws {
        let h = try await DeliveryHarness(tls: true)
        defer { Task { await h.close() } }
        let subscription = try await h.subscribe(.apns, token: Self.device)
        h.start()
        let payload = #"{"s":"OK","t":"value","app":"toto","sp":"/a","d":"{\"x\":1}"}"#
        try await h.queue(subscription, payload: payload)
        try await h.eventually("the delivery") { h.sends("apns").contains { $0.status == 200 } }
        let received = try #require(h.sends("apns").first)
        #expect(String(decoding: received.data, as: UTF8.self) == #"{"aps":{"content-available":1},"s":"OK","t":"value","app":"toto","sp":"/a","d":"{\"x\":1}"}"#)
        #expect(received.headers["apns-push-type"] == "background" && received.headers["apns-priority"] == "5")
        #expect(received.headers["apns-topic"] == FakeProviders.apnsTopic)
        let expiration = try #require(received.headers["apns-expiration"].flatMap { Int64($0) })
        #expect(expiration == h.base / 1_000 + 7_200)
    }

    @Test("Web Push: the push service gets the data map encrypted to the browser, VAPID for its origin, TTL, Urgency, a Topic for values; Python's http_ece and py_vapid agree")
    func webPushRequest() async throws {
        try PythonPackages.require("http_ece", package: "http-ece")
        try PythonPackages.require("py_vapid", package: "py-vapid")
        let h = try await DeliveryHarness(tls: true)
        defer { Task { await h.close() } }
        let value = try await h.subscribe(.webpush, token: h.fakes.webPushSubscription("values"))
        let events = try await h.subscribe(.webpush, token: h.fakes.webPushSubscription("events"), path: "/e", mode: .childEvent)
        h.start()
        let payload = #"{"s":"OK","t":"value","app":"toto","sp":"/a","d":"{\"é\":\"日本\"}"}"#
        try await h.queue(value, payload: payload)
        try await h.queue(events, .childEvent, payload: #"{"s":"OK","t":"childEvent"}"#)
        try await h.eventually("both deliveries") { h.sends("webpush").filter { $0.status == 201 }.count == 2 }
        let received = try #require(h.sends("webpush").first { $0.target == "values" })
        #expect(String(decoding: received.data, as: UTF8.self) == payload)
        #expect(received.headers["ttl"] == "7200" && received.headers["urgency"] == "high" && received.headers["content-encoding"] == "aes128gcm")
        #expect(received.headers["topic"]?.utf8.count == 32)
        #expect(h.sends("webpush").first { $0.target == "events" }?.headers["topic"] == nil, "childEvent notifications are never replaced")
        let authorization = try #require(received.headers["authorization"])
        let claims = try VAPIDVerifier.verify(authorization, origin: h.fakes.webPushOrigin, now: h.clock.now / 1_000)
        #expect(claims.subject == DeliveryHarness.vapidSubject && claims.publicKey == h.vapid.publicKeyText)

        let secrets = try #require(h.fakes.webPushSubscriberSecrets("values"))
        let script = """
            import base64, sys
            import http_ece
            from cryptography.hazmat.primitives.asymmetric import ec
            from py_vapid import Vapid02
            def b(t): return base64.urlsafe_b64decode(t + "=" * (-len(t) % 4))
            private = ec.derive_private_key(int.from_bytes(b(sys.argv[1]), "big"), ec.SECP256R1())
            sys.stdout.write(http_ece.decrypt(b(sys.argv[3]), private_key=private, auth_secret=b(sys.argv[2]), version="aes128gcm").decode("utf-8") + "\\n")
            print(Vapid02.verify(sys.argv[4].replace(", k=", ",k=")))
            """
        let process = TestProcesses.make(
            command: "python3", ["-c", script, secrets.privateKey, secrets.auth, Base64URL.encodeToString(received.raw), authorization])
        let text = try TestProcesses.output(process)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first == payload, "\(text)")
        #expect(lines.dropFirst().first == "True", "\(text)")
    }

    @Test("Web Push: a browser subscription the policy no longer accepts is revoked without a request; one that never was a subscription too")
    func webPushRefusedAtSend() async throws {
        let h = try await DeliveryHarness(tls: true)
        defer { Task { await h.close() } }
        let strict = WebPushSender(
            vapid: h.vapid, subject: DeliveryHarness.vapidSubject, policy: WebPushEndpointPolicy(allowedHosts: ["fcm.googleapis.com"]), ttl: 60,
            context: SenderContext(transport: h.transport, timeout: .seconds(10), clock: h.clock))
        func notification(_ context: String) -> StoredNotification {
            StoredNotification(
                id: 1,
                entry: OutboxEntry(
                    app: "toto", subscriptionHandle: 1, subscriptionID: "s", kind: .webpush, target: context, destination: nil, notification: .value,
                    payload: Array(#"{"t":"value"}"#.utf8), recordSeq: 1),
                createdAt: h.clock.now, nextAttemptAt: 0, attempts: 0)
        }
        let local = h.fakes.webPushSubscription("local")
        for context in [local, "not json", #"{"endpoint":"https://fcm.googleapis.com/x","keys":{"p256dh":"AAAA","auth":"AAAA"}}"#] {
            let outcome = await strict.send(notification(context), now: h.clock.now)
            guard case .revokeDeadToken(let reason) = outcome else {
                Issue.record("\(context.prefix(40)): \(outcome)")
                continue
            }
            #expect(reason.contains("can no longer be used"), "\(reason)")
        }
        #expect(h.sends("webpush").isEmpty)
        // A payload over one record's plaintext is a defect of ours, never sent.
        let tooLong = StoredNotification(
            id: 2,
            entry: OutboxEntry(
                app: "toto", subscriptionHandle: 1, subscriptionID: "s", kind: .webpush, target: local, destination: nil, notification: .value,
                payload: Array(repeating: UInt8(ascii: "x"), count: 4_000), recordSeq: 1),
            createdAt: h.clock.now, nextAttemptAt: 0, attempts: 0)
        let permissive = try #require(h.directory.webpush)
        guard case .failed = await permissive.send(tooLong, now: h.clock.now) else {
            Issue.record("a 4,000-byte plaintext was not refused as a defect")
            return
        }
        #expect(h.sends("webpush").isEmpty)
    }
}

extension DirectProvidersTests.Expected {
    var isDeliveredAtOnce: Bool {
        if case .delivered = self { return true }
        return false
    }
}
