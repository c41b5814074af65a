import Foundation
import Logging
import PushContracts
import PushCore
@testable import PushDelivery
import PushFakes
import PushHTTP
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
        var harmonyos: HarmonySender?

        func sender(for entry: OutboxEntry) -> (any NotificationSender)? {
            switch entry.kind {
            case .fcm: fcm
            case .hms: hms
            case .harmonyos: harmonyos
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
        transport = try HTTP2Transport(configuration: .init(connectionsPerOrigin: 2, caFile: ca), fallback: try HTTP1Transport(caFile: ca), ownsFallback: true)
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

    func makeDispatcher(configuration: Dispatcher.Configuration = .init(pauseProbe: 30_000), store: (any DeliveryStore)? = nil, tenure: ClaimTenure = ClaimTenure()) {
        var logger = Logger(label: "delivery-test")
        logger.logLevel = .critical
        let random = random
        dispatcher = Dispatcher(
            store: store ?? self.store, senders: directory, configuration: configuration, notices: RevokeNotices(), index: Unfollowed(), clock: clock,
            random: { random.value.withLock { $0 } }, counters: counters, tenure: tenure, logger: logger)
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
    func subscribe(_ kind: SubscriptionKind = .fcm, token: String, path: String = "/a", mode: Mode = .value) async throws -> (Subscription, Int64) {
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
        try await eventually("the dispatcher to sleep") { dispatcher.asleep && clock.sleeperCount >= 1 }
        clock.advance(by: .milliseconds(milliseconds))
    }

    func sends(_ provider: String) -> [FakeProviders.Received] { fakes.received(provider: provider) }

    func outbox() async throws -> [StoredNotification] { try await store.notifications(limit: 1000) }
}

/// The real SQLite store whose settlements fail while `failing` is set (the database away), or,
/// when `holding`, wait until it is cleared (a store cut off, its answers held in transit):
/// every other operation goes through.
final class SettlementsFailing: DeliveryStore {
    let store: SQLiteStore
    let holding: Bool
    let failing = Mutex(true)
    let attempts = Mutex(0)
    /// Settlements waiting now (`holding`).
    let waiting = Mutex(0)

    init(_ store: SQLiteStore, holding: Bool = false) {
        self.store = store
        self.holding = holding
    }

    func claim(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>, capped: [SenderKey: Int]) async throws
        -> [StoredNotification]
    {
        try await store.claim(now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding, capped: capped)
    }

    func settle(_ settlements: [Settlement], attempts history: [DeliveryAttempt], claimant: String, now: Int64) async throws -> SettleResult {
        attempts.withLock { $0 += 1 }
        if holding {
            waiting.withLock { $0 += 1 }
            defer { waiting.withLock { $0 -= 1 } }
            while failing.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        } else if failing.withLock({ $0 }) {
            throw StoreError.unavailable("the test's database is away")
        }
        return try await store.settle(settlements, attempts: history, claimant: claimant, now: now)
    }

    func nextDue(excluding: Set<SenderKey>) async throws -> Int64? { try await store.nextDue(excluding: excluding) }

    func releaseClaims(claimant: String?) async throws -> Int { try await store.releaseClaims(claimant: claimant) }

    func releaseClaims(claimant: String, keeping: Set<Int64>) async throws -> Int { try await store.releaseClaims(claimant: claimant, keeping: keeping) }

    func discardWaiting(for sender: SenderKey, createdBefore: Int64, now: Int64, keeping: Bool) async throws -> Int {
        try await store.discardWaiting(for: sender, createdBefore: createdBefore, now: now, keeping: keeping)
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

    func claim(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>, capped: [SenderKey: Int]) async throws
        -> [StoredNotification]
    {
        let claimed = try await store.claim(now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding, capped: capped)
        let first = claims.withLock { count in
            count += 1
            return count == 1
        }
        if first && loseFirstClaim && !claimed.isEmpty { throw StoreError.unavailable("the connection closed before the query was answered") }
        return claimed
    }

    func settle(_ settlements: [Settlement], attempts: [DeliveryAttempt], claimant: String, now: Int64) async throws -> SettleResult {
        try await store.settle(settlements, attempts: attempts, claimant: claimant, now: now)
    }

    /// With `failNextDue`, the first read of the next due time after a claim fails.
    let failNextDue = Mutex(false)

    func nextDue(excluding: Set<SenderKey>) async throws -> Int64? {
        if failNextDue.withLock({ fail in defer { fail = false }; return fail }) { throw StoreError.unavailable("the connection closed before the query was answered") }
        return try await store.nextDue(excluding: excluding)
    }

    func releaseClaims(claimant: String?) async throws -> Int { try await store.releaseClaims(claimant: claimant) }

    func releaseClaims(claimant: String, keeping: Set<Int64>) async throws -> Int { try await store.releaseClaims(claimant: claimant, keeping: keeping) }

    func discardWaiting(for sender: SenderKey, createdBefore: Int64, now: Int64, keeping: Bool) async throws -> Int {
        try await store.discardWaiting(for: sender, createdBefore: createdBefore, now: now, keeping: keeping)
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
