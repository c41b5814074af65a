import Foundation
import Logging
import PushCore
@testable import PushDelivery
import PushJOSE
import PushStore
import PushTestSupport
import Synchronization
import Testing

/// Sends to the fake providers from a real SQLite outbox, with a manual clock.
/// The revoke notification of a refused subscription, as the engine builds it (in shape).
struct RevokeNotices: RevocationNotices {
    func notice(for entry: OutboxEntry) async -> OutboxEntry? {
        var notice = entry
        notice.notification = .revoke
        notice.payload = Array(#"{"s":"OK","t":"revoke","r":"delivery_rejected"}"#.utf8)
        if entry.kind == .webhook { notice.payload = Array(#"{"app":"toto","event":{"t":"revoke"}}"#.utf8) }
        return notice
    }
}

/// No index follows these tests' subscriptions.
struct Unfollowed: SubscriptionIndexFollower {
    func nudge() {}
    func catchUp() async {}
}

final class DeliveryHarness: @unchecked Sendable {
    let fakes: FakeProviders
    /// When the tests start, by the clock below (milliseconds since the epoch).
    let base = Int64(Date().timeIntervalSince1970) * 1000
    /// The one clock of the dispatcher, the senders and the fakes.
    let clock: ManualClock
    let store: SQLiteStore
    let path: String
    let transport: HTTP2Transport
    var directory: Directory
    let random: RandomValue
    let counters = DeliveryCounters()
    var dispatcher: Dispatcher!
    var task: Task<Void, any Error>?
    static let webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    struct Directory: SenderDirectory {
        let fcm: FCMSender
        let hms: HMSSender
        let webhook: WebhookSender
        /// With TLS only: the APNs fake speaks HTTP/2, and browser subscriptions are `https`.
        var apns: APNsSender?
        var webpush: WebPushSender?

        func sender(for entry: OutboxEntry) -> (any NotificationSender)? {
            switch entry.kind {
            case .mobile: fcm
            case .huawei: hms
            case .webhook: entry.destination == "orders" ? webhook : nil
            case .apns: apns
            case .webpush: webpush
            }
        }
    }

    /// The application server's VAPID key of the Web Push sender (TLS harness).
    let vapid = VAPIDKey(privateKey: .init())
    static let vapidSubject = "mailto:push-admin@example.com"

    var now: @Sendable () -> Int64 {
        let clock = clock
        return { clock.now }
    }

    init(tls: Bool = false, random: Double = 0.5, configuration: Dispatcher.Configuration = .init(pauseProbe: 30_000)) async throws {
        self.random = RandomValue(random)
        clock = ManualClock(start: base)
        fakes = try await FakeProviders.start(tls: tls, webhooks: ["orders": Self.webhookSecret], clock: clock)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-delivery-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        path = folder.appendingPathComponent("store.db").path
        store = try SQLiteStore(path: path)
        // HTTPS: the service's HTTP/2 transport; plain HTTP: its async-http-client fallback.
        let ca = tls ? ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path : nil
        transport = try HTTP2Transport(configuration: .init(connectionsPerOrigin: 2, caFile: ca), fallback: try AsyncHTTPTransport(clients: 2, caFile: ca))
        // Generous: a loaded CI machine must not turn a slow answer into a retry the manual clock never reaches.
        let context = SenderContext(transport: transport, timeout: .seconds(60), clock: clock, counters: counters)
        directory = Directory(
            fcm: FCMSender(key: fakes.serviceAccount, endpoint: fakes.fcmEndpoint, context: context),
            hms: HMSSender(
                clientID: fakes.hmsClientID, clientSecret: fakes.hmsClientSecret, endpoint: fakes.hmsEndpoint, tokenEndpoint: fakes.hmsTokenEndpoint,
                context: context),
            webhook: WebhookSender(url: fakes.webhookURL("orders"), secret: try WebhookSecret(Self.webhookSecret), context: context))
        if tls {
            let token = try APNsProviderToken(teamID: FakeProviders.apnsTeamID, keyID: FakeProviders.apnsKeyID, privateKeyPEM: fakes.apnsPrivateKeyPEM)
            directory.apns = APNsSender(endpoint: fakes.apnsEndpoint, topic: FakeProviders.apnsTopic, token: token, storage: 7_200, context: context)
            // The fake runs on loopback: private addresses allowed here (the policy is tested on its own).
            directory.webpush = WebPushSender(
                vapid: vapid, subject: Self.vapidSubject, policy: WebPushEndpointPolicy(allowPrivateAddresses: true), ttl: 7_200, context: context)
            fakes.setWebPushVAPIDKey(vapid.publicKeyText)
        }
        makeDispatcher(configuration: configuration)
    }

    func makeDispatcher(configuration: Dispatcher.Configuration = .init(pauseProbe: 30_000), store: (any DeliveryStore)? = nil) {
        var logger = Logger(label: "delivery-test")
        logger.logLevel = .critical
        let random = random
        dispatcher = Dispatcher(
            store: store ?? self.store, senders: directory, configuration: configuration, notices: RevokeNotices(), index: Unfollowed(), clock: clock,
            random: { random.value.withLock { $0 } }, counters: counters, logger: logger)
    }

    func start() {
        let dispatcher = dispatcher!
        task = Task { try await dispatcher.run() }
    }

    func stop() async {
        task?.cancel()
        _ = try? await task?.value
        task = nil
    }

    func close() async {
        await stop()
        try? await transport.shutdown()
        await fakes.stop()
    }

    @discardableResult
    func subscribe(_ kind: SubscriptionKind = .mobile, token: String, path: String = "/a", mode: Mode = .value) async throws -> (Subscription, Int64) {
        let tuple = SubscriptionTuple(
            app: "toto", uid: "u1", kind: kind, destination: kind == .webhook ? "orders" : nil, path: try Path(path), context: token)
        let subscription = Subscription(
            id: SubscriptionID.derive(tuple), tuple: tuple, mode: mode, format: .v1, encryption: nil, createdAt: 1_700_000_000, expiresAt: 4_000_000_000)
        guard case .created(let created) = try await store.save(subscription, allowUpdate: false), let handle = created.handle else {
            throw StoreError.corrupt("not created")
        }
        return (created, handle)
    }

    func queue(_ subscription: (Subscription, Int64), _ kind: NotificationKind = .value, payload: String = #"{"s":"OK","t":"value"}"#, seq: Int64 = 1)
        async throws
    {
        var batch = CommitBatch(now: now())
        batch.operations = [
            .notify(
                OutboxEntry(
                    app: "toto", subscriptionHandle: subscription.1, subscriptionID: subscription.0.id, kind: subscription.0.kind,
                    target: subscription.0.tuple.context, destination: subscription.0.tuple.destination, notification: kind,
                    payload: Array(payload.utf8), recordSeq: seq))
        ]
        _ = try await store.commit(batch)
        dispatcher.nudge()
    }

    /// Waits (real time) until `condition` holds.
    func eventually(_ what: String, timeout: Double = 60, _ condition: () async throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while try await !condition() {
            guard Date() < deadline else { throw HarnessError("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits until the dispatcher has nothing to do before its timer, then moves the clock.
    func advance(by milliseconds: Int64) async throws {
        try await eventually("the dispatcher to sleep") { clock.sleeperCount >= 1 }
        clock.advance(by: .milliseconds(milliseconds))
    }

    func sends(_ provider: String) -> [FakeProviders.Received] { fakes.received(provider: provider) }

    func outbox() async throws -> [StoredNotification] { try await store.notifications(limit: 1000) }
}

/// The real SQLite store whose settlements fail while `failing` is set (the database away):
/// every other operation goes through.
final class SettlementsFailing: DeliveryStore {
    let store: SQLiteStore
    let failing = Mutex(true)
    let attempts = Mutex(0)

    init(_ store: SQLiteStore) { self.store = store }

    func claim(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>) async throws -> [StoredNotification] {
        try await store.claim(now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding)
    }

    func settle(_ settlements: [Settlement], claimant: String, now: Int64) async throws -> SettleResult {
        attempts.withLock { $0 += 1 }
        if failing.withLock({ $0 }) { throw StoreError.unavailable("the test's database is away") }
        return try await store.settle(settlements, claimant: claimant, now: now)
    }

    func nextDue(excluding: Set<SenderKey>) async throws -> Int64? { try await store.nextDue(excluding: excluding) }

    func releaseClaims(claimant: String?) async throws -> Int { try await store.releaseClaims(claimant: claimant) }

    func releaseClaims(claimant: String, keeping: Set<Int64>) async throws -> Int { try await store.releaseClaims(claimant: claimant, keeping: keeping) }

    func discardWaiting(for sender: SenderKey, createdBefore: Int64, now: Int64) async throws -> Int {
        try await store.discardWaiting(for: sender, createdBefore: createdBefore, now: now)
    }
}

/// The real SQLite store whose first claim commits and then fails, as a claim whose answer
/// the connection lost after the commit.
final class FirstClaimAnswerLost: DeliveryStore {
    let store: SQLiteStore
    let claims = Mutex(0)
    let loseFirstClaim: Bool

    init(_ store: SQLiteStore, loseFirstClaim: Bool = true) {
        self.store = store
        self.loseFirstClaim = loseFirstClaim
    }

    func claim(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>) async throws -> [StoredNotification] {
        let claimed = try await store.claim(now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding)
        let first = claims.withLock { count in
            count += 1
            return count == 1
        }
        if first && loseFirstClaim && !claimed.isEmpty { throw StoreError.unavailable("the connection closed before the query was answered") }
        return claimed
    }

    func settle(_ settlements: [Settlement], claimant: String, now: Int64) async throws -> SettleResult {
        try await store.settle(settlements, claimant: claimant, now: now)
    }

    /// With `failNextDue`, the first read of the next due time after a claim fails.
    let failNextDue = Mutex(false)

    func nextDue(excluding: Set<SenderKey>) async throws -> Int64? {
        if failNextDue.withLock({ fail in defer { fail = false }; return fail }) { throw StoreError.unavailable("the connection closed before the query was answered") }
        return try await store.nextDue(excluding: excluding)
    }

    func releaseClaims(claimant: String?) async throws -> Int { try await store.releaseClaims(claimant: claimant) }

    func releaseClaims(claimant: String, keeping: Set<Int64>) async throws -> Int { try await store.releaseClaims(claimant: claimant, keeping: keeping) }

    func discardWaiting(for sender: SenderKey, createdBefore: Int64, now: Int64) async throws -> Int {
        try await store.discardWaiting(for: sender, createdBefore: createdBefore, now: now)
    }
}

final class RandomValue: Sendable {
    let value: Mutex<Double>
    init(_ value: Double) { self.value = Mutex(value) }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

@Suite("Delivery against the fake providers", .serialized)
struct DispatcherTests {
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
        let huawei = try await h.subscribe(.huawei, token: "h1", path: "/h")
        let fcm = SenderKey(app: "toto", kind: .mobile)
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
            if h.dispatcher.paused[fcm] != nil && h.dispatcher.isIdle && h.clock.sleeperCount >= 1 { h.clock.advance(by: .milliseconds(30_000)) }
            return false
        }
        try await h.eventually("delivered") {
            if try await h.outbox().isEmpty { return true }
            // Still paused and asleep until the next probe: move the clock to it.
            if h.dispatcher.paused[fcm] != nil && h.dispatcher.isIdle && h.clock.sleeperCount >= 1 { h.clock.advance(by: .milliseconds(30_000)) }
            return false
        }
        #expect(h.dispatcher.paused.isEmpty)
        #expect(h.sends("fcm").filter { $0.status == 200 }.count == 2)
        let kept = try await h.store.subscription(id: first.0.id)
        let keptToo = try await h.store.subscription(id: other.0.id)
        #expect(kept != nil && keptToo != nil)
        #expect(h.dispatcher.counters.deliveries(provider: "fcm", outcome: "revoked") == 0)
    }

    @Test("a paused application keeps a retry window of notifications, counted from their creation: the outbox stays bounded")
    func pausedOutboxBounded() async throws {
        let h = try await DeliveryHarness(configuration: .init(retry: RetryPolicy(window: 10_000), pauseProbe: 30_000))
        defer { Task { await h.close() } }
        h.fakes.script("t1", Array(repeating: .recorded("fcm-third-party-auth"), count: 50))
        let subscription = try await h.subscribe(token: "t1", mode: .childEvent)
        let fcm = SenderKey(app: "toto", kind: .mobile)
        h.start()
        try await h.queue(subscription, .childEvent, seq: 1)
        try await h.eventually("the pause") { h.dispatcher.paused[fcm] != nil }
        // Two simulated minutes of writes, one a second, while the application stays paused
        // (every probe refused): childEvent notifications never merge.
        var depths: [Int] = []
        for second in 2...120 {
            try await h.advance(by: 1_000)
            try await h.queue(subscription, .childEvent, seq: Int64(second))
            try await h.eventually("the write seen") { h.clock.sleeperCount >= 1 }
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
        #expect(h.dispatcher.paused[SenderKey(app: "toto", kind: .mobile)]?.reason.contains("invalid_grant") == true)
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
        let illegal = try await h.subscribe(.huawei, token: "illegal-1")
        let good = try await h.subscribe(.huawei, token: "good-1", path: "/g")
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
            if h.clock.sleeperCount > 0 { h.clock.advance(by: .milliseconds(2_000)) }
            return try await h.outbox().isEmpty
        }
        // The subscription's next notification goes at once, not after a lease.
        try await h.queue(first, payload: #"{"s":"OK","t":"value","n":2}"#, seq: 2)
        try await h.eventually("the next one sent") { h.sends("fcm").count == 2 }
        #expect(h.sends("fcm").count == 2, "nothing sent twice")
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
            if h.clock.sleeperCount > 0 && advanced < 10_000 {
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
            if h.clock.sleeperCount > 0 && advanced < 10_000 {
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
        let huawei = try await h.subscribe(.huawei, token: "h1", path: "/h")
        h.start()
        try await h.queue(mobile)
        try await h.queue(huawei)
        try await h.eventually("delivered") { try await h.outbox().isEmpty }
        #expect(h.sends("fcm").map(\.status) == [200])
        #expect(h.sends("hms").map(\.status) == [200])
    }
}

@Suite("Webhook signatures against the Standard Webhooks library")
struct StandardWebhooksTests {
    @Test("a webhook the service sent verifies with the standardwebhooks Python package")
    func pythonVerifies() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        let hook = try await h.subscribe(.webhook, token: "ctx", path: "/w", mode: .childEvent)
        h.start()
        try await h.queue(hook, .childEvent, payload: #"{"app":"toto","uid":"u1","path":"/w","event":{"t":"child","é":"\/ü"}}"#)
        try await h.eventually("delivered") { h.sends("webhook").count == 1 }
        let received = h.sends("webhook")[0]
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-whsec-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(received.data).write(to: folder.appendingPathComponent("body"))
        let script = """
            import sys
            from standardwebhooks.webhooks import Webhook
            body = open(sys.argv[1], "rb").read().decode("utf-8")
            headers = {"webhook-id": sys.argv[2], "webhook-timestamp": sys.argv[3], "webhook-signature": sys.argv[4]}
            Webhook(sys.argv[5]).verify(body, headers)
            print("verified")
            """
        try PythonPackages.require("standardwebhooks")
        let process = TestProcesses.make(
            command: "python3",
            [
                "-c", script, folder.appendingPathComponent("body").path, received.headers["webhook-id"] ?? "",
                received.headers["webhook-timestamp"] ?? "", received.headers["webhook-signature"] ?? "", DeliveryHarness.webhookSecret,
            ])
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try TestProcesses.launch(process)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0 && text.contains("verified"), "standardwebhooks says: \(text)")
    }
}
