import Foundation
import PushCore
import PushContracts
@testable import PushStore
import Testing

/// The contract of the delivery side of a store: claims of the oldest notification of each
/// subscription, settlements, coalescing against retries, revocation and discard.
@Suite("Delivery store contract")
struct DeliveryStoreContractTests {
    typealias Store = any SubscriptionStore & IngestStore & DeliveryStore

    func stored(_ store: Store, _ subscription: Subscription) async throws -> Int64 {
        guard case .created(let created) = try await store.save(subscription, allowUpdate: false), let handle = created.handle else {
            throw StoreError.corrupt("not created")
        }
        return handle
    }

    func queue(_ store: Store, now: Int64, _ entries: [OutboxEntry]) async throws {
        var batch = CommitBatch(now: now)
        batch.operations = entries.map { .notify($0) }
        _ = try await store.commit(batch)
    }

    /// Lets a claim of `milliseconds` end. On PostgreSQL claims are timed by the database's
    /// clock (several instances' clocks may disagree): real time has to pass. On SQLite the
    /// caller's `now` says, and the tests pass a later one.
    func passClaims(_ kind: StoreKind, milliseconds: Int) async throws {
        if kind == .postgres { try await Task.sleep(for: .milliseconds(milliseconds + 100)) }
    }

    func payloads(_ store: Store) async throws -> [String] {
        try await store.notifications(limit: 100).map { String(decoding: $0.entry.payload, as: UTF8.self) }
    }

    @Test("every kind is stored, counted, queued, claimed and settled (apns and webpush since schema 6 / 4)", arguments: StoreKind.all)
    func everyKind(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let webPush = #"{"endpoint":"https://push.example.net/s/1","keys":{"auth":"BTBZMqHH6r4Tts7J_aSIgg","p256dh":"BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"}}"#
        let subscriptions = SubscriptionKind.allCases.map { subscriptionKind in
            makeSubscription(
                kind: subscriptionKind, path: "/k/\(subscriptionKind.rawValue)",
                context: subscriptionKind == .webhook ? nil : subscriptionKind == .webpush ? webPush : subscriptionKind == .apns ? String(repeating: "ab", count: 32) : "t",
                destination: subscriptionKind == .webhook ? "orders" : nil)
        }
        var handles: [Int64] = []
        for subscription in subscriptions { handles.append(try await stored(store, subscription)) }
        for (subscription, handle) in zip(subscriptions, handles) {
            let read = try await store.subscription(id: subscription.id)
            #expect(read?.kind == subscription.kind && read?.tuple.context == subscription.tuple.context && read?.handle == handle)
        }
        #expect(try await store.countByKind() == Dictionary(uniqueKeysWithValues: SubscriptionKind.allCases.map { ($0, 1) }))
        try await queue(store, now: 10, zip(subscriptions, handles).map { entry($0, $1, .value, payload: $0.kind.rawValue) })
        let claimed = try await store.claim(now: 20, limit: 100, claimant: "me", leaseUntil: 1_000, excluding: [])
        #expect(Set(claimed.map(\.entry.kind)) == Set(SubscriptionKind.allCases))
        #expect(claimed.allSatisfy { String(decoding: $0.entry.payload, as: UTF8.self) == $0.entry.kind.rawValue })
        #expect(claimed.first { $0.entry.kind == .webpush }?.entry.target == webPush)
        #expect(try await store.outboxDepth().count == SubscriptionKind.allCases.count)
    }

    @Test("a paused sender's notifications created before the cutoff are discarded, unless claimed; other senders' are kept", arguments: StoreKind.all)
    func discardWaiting(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let orders = makeSubscription(kind: .webhook, path: "/o", context: nil, destination: "orders", mode: .childEvent)
        let audit = makeSubscription(kind: .webhook, path: "/a", context: nil, destination: "audit", mode: .childEvent)
        let mobile = makeSubscription(path: "/m", mode: .childEvent)
        let handles = [try await stored(store, orders), try await stored(store, audit), try await stored(store, mobile)]
        for now: Int64 in [10, 20, 30] {
            try await queue(
                store, now: now,
                [orders, audit, mobile].enumerated().map { entry($1, handles[$0], .childEvent, payload: "\($1.tuple.destination ?? "mobile")@\(now)") })
        }
        // The oldest of `orders` is claimed (in flight): kept. (A lease of 10 minutes: on
        // PostgreSQL it lasts `leaseUntil - now` of the database's clock.)
        let claimed = try await store.claim(
            now: 100, limit: 1, claimant: "me", leaseUntil: 600_000, excluding: [SenderKey(app: "toto", kind: .webhook, destination: "audit"), SenderKey(app: "toto", kind: .fcm)])
        #expect(claimed.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["orders@10"])
        let ordersKey = SenderKey(app: "toto", kind: .webhook, destination: "orders")
        #expect(try await store.discardWaiting(for: ordersKey, createdBefore: 30, now: 100) == 1)
        #expect(try await store.discardWaiting(for: SenderKey(app: "toto", kind: .fcm), createdBefore: 25, now: 100) == 2)
        #expect(try await store.discardWaiting(for: SenderKey(app: "other", kind: .fcm), createdBefore: 1_000, now: 100) == 0)
        #expect(try await payloads(store).sorted() == ["audit@10", "audit@20", "audit@30", "mobile@30", "orders@10", "orders@30"])
        #expect(try await store.outboxDepth().count == 6)
    }

    @Test("a webhook destination left out of a claim leaves the application's other webhooks and kinds in", arguments: StoreKind.all)
    func excludesOneDestination(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let orders = makeSubscription(kind: .webhook, path: "/o", context: nil, destination: "orders")
        let audit = makeSubscription(kind: .webhook, path: "/a", context: nil, destination: "audit")
        let mobile = makeSubscription(path: "/m")
        var entries: [OutboxEntry] = []
        for subscription in [orders, audit, mobile] {
            entries.append(entry(subscription, try await stored(store, subscription), .value, payload: subscription.tuple.destination ?? "mobile"))
        }
        try await queue(store, now: 10, entries)
        let excluded: Set<SenderKey> = [SenderKey(app: "toto", kind: .webhook, destination: "orders")]
        #expect(try await store.nextDue(excluding: excluded) == 10)
        let claimed = try await store.claim(now: 10, limit: 10, claimant: "x", leaseUntil: 60_000, excluding: excluded)
        #expect(Set(claimed.map { String(decoding: $0.entry.payload, as: UTF8.self) }) == ["audit", "mobile"])
        #expect(try await store.nextDue(excluding: excluded) == nil)
        #expect(try await store.claim(now: 10, limit: 10, claimant: "x", leaseUntil: 60_000, excluding: []).count == 1)
    }

    @Test("a capped (paced) sender gives a claim at most its number, earliest first, the others their due ones within the limit; the next due time leaves it out once its number was taken (issue 34)", arguments: StoreKind.all)
    func cappedSender(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let phones = (0..<6).map { makeSubscription(path: "/p\($0)") }
        let hook = makeSubscription(kind: .webhook, path: "/h", context: nil, destination: "orders")
        var entries: [OutboxEntry] = []
        for (index, phone) in phones.enumerated() { entries.append(entry(phone, try await stored(store, phone), .value, payload: "phone\(index)")) }
        let laterHook = makeSubscription(kind: .webhook, path: "/h2", context: nil, destination: "orders")
        try await queue(store, now: 10, entries + [entry(hook, try await stored(store, hook), .value, payload: "hook")])
        try await queue(store, now: 900, [entry(laterHook, try await stored(store, laterHook), .value, payload: "hook later")])
        let fcm = SenderKey(app: "toto", kind: .fcm)
        func texts(_ claimed: [StoredNotification]) -> [String] { claimed.map { String(decoding: $0.entry.payload, as: UTF8.self) } }
        // Two of FCM's six (the earliest), and the webhook's due one; its number taken, FCM is
        // left out of the next due time (the webhook's later one is next).
        let first = try await store.claimDue(now: 10, limit: 100, claimant: "x", leaseUntil: 60_000, excluding: [], capped: [fcm: 2])
        #expect(texts(first.notifications).sorted() == ["hook", "phone0", "phone1"])
        #expect(first.nextDue == .at(900))
        // The limit holds over both parts.
        let second = try await store.claim(now: 10, limit: 1, claimant: "x", leaseUntil: 60_000, excluding: [], capped: [fcm: 3])
        #expect(texts(second) == ["phone2"])
        // A cap not filled: FCM's later ones (none here) count for the next due time again.
        let third = try await store.claimDue(now: 10, limit: 100, claimant: "x", leaseUntil: 60_000, excluding: [], capped: [fcm: 10])
        #expect(texts(third.notifications).sorted() == ["phone3", "phone4", "phone5"])
        #expect(third.nextDue == .at(900))
        // Excluded wins over capped.
        let late = makeSubscription(path: "/p6")
        try await queue(store, now: 20, [entry(late, try await stored(store, late), .value, payload: "phone6")])
        let hookOnly = try await store.claim(now: 1_000, limit: 100, claimant: "x", leaseUntil: 60_000, excluding: [fcm], capped: [fcm: 5])
        #expect(texts(hookOnly) == ["hook later"])
        let phoneOnly = try await store.claim(now: 1_000, limit: 100, claimant: "x", leaseUntil: 60_000, excluding: [], capped: [fcm: 5])
        #expect(texts(phoneOnly) == ["phone6"])
    }

    @Test("claimDue: the claim, and the next due time only when it took fewer than its limit (SQLite in one transaction)", arguments: StoreKind.all)
    func claimDue(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let subscriptions = [makeSubscription(path: "/a"), makeSubscription(path: "/b"), makeSubscription(path: "/c"), makeSubscription(path: "/d")]
        var handles: [Int64] = []
        for subscription in subscriptions { handles.append(try await stored(store, subscription)) }
        try await queue(store, now: 10, (0..<3).map { entry(subscriptions[$0], handles[$0], .value, payload: "p\($0)") })
        try await queue(store, now: 500, [entry(subscriptions[3], handles[3], .value, payload: "later")])
        // Its limit: more may be due, nothing read.
        let full = try await store.claimDue(now: 10, limit: 2, claimant: "x", leaseUntil: 2_010, excluding: [])
        #expect(full.notifications.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["p0", "p1"])
        #expect(full.nextDue == .notRead)
        // Fewer: the next one not claimed (the one due at 500), read after the claim.
        let rest = try await store.claimDue(now: 10, limit: 5, claimant: "x", leaseUntil: 2_010, excluding: [])
        #expect(rest.notifications.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["p2"])
        #expect(rest.nextDue == .at(500))
        // The one left excluded: nothing waits.
        let none = try await store.claimDue(now: 10, limit: 5, claimant: "x", leaseUntil: 2_010, excluding: [SenderKey(app: "toto", kind: .fcm)])
        #expect(none.notifications.isEmpty && none.nextDue == .none)
        // Later: the one due at 500, and the three whose leases ended at 2,010.
        try await passClaims(kind, milliseconds: 2_000)
        let later = try await store.claimDue(now: 2_011, limit: 5, claimant: "y", leaseUntil: 4_000, excluding: [])
        #expect(later.notifications.count == 4 && later.nextDue == .none)
    }

    @Test("settleAndClaimDue: a settled head lets the next of its subscription be claimed in the same call", arguments: StoreKind.all)
    func settleAndClaimDue(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let a = makeSubscription(path: "/a", mode: .childEvent)
        let ha = try await stored(store, a)
        try await queue(store, now: 10, [entry(a, ha, .childEvent, payload: "a1"), entry(a, ha, .childEvent, payload: "a2")])
        let first = try await store.claimDue(now: 10, limit: 10, claimant: "x", leaseUntil: 60_000, excluding: [])
        #expect(first.notifications.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["a1"])
        let (settled, claim) = try await store.settleAndClaimDue(
            [.delivered(id: first.notifications[0].id)], settledAt: 20, claimant: "x", now: 20, limit: 10, leaseUntil: 60_000, excluding: [])
        #expect(settled.lost == 0)
        let second = try claim.get()
        #expect(second.notifications.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["a2"])
        #expect(second.nextDue == .none)
        // A settlement of a claim not held is counted lost; the claim still runs.
        let (late, none) = try await store.settleAndClaimDue(
            [.delivered(id: first.notifications[0].id)], settledAt: 30, claimant: "x", now: 30, limit: 10, leaseUntil: 60_000, excluding: [])
        #expect(late.lost == 1)
        #expect(try none.get().notifications.isEmpty)
        #expect(try await payloads(store) == ["a2"])
    }

    @Test("only the oldest notification of a subscription is claimed, and only once", arguments: StoreKind.all)
    func claimsHeads(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let a = makeSubscription(path: "/a", mode: .childEvent)
        let b = makeSubscription(path: "/b", context: "token-2", mode: .childEvent)
        let ha = try await stored(store, a)
        let hb = try await stored(store, b)
        try await queue(store, now: 10, [entry(a, ha, .childEvent, payload: "a1"), entry(a, ha, .childEvent, payload: "a2"), entry(b, hb, .childEvent, payload: "b1")])
        // Not due yet.
        #expect(try await store.claim(now: 9, limit: 10, claimant: "x", leaseUntil: 60_000, excluding: []).isEmpty)
        let first = try await store.claim(now: 10, limit: 10, claimant: "x", leaseUntil: 2_010, excluding: [])
        #expect(first.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["a1", "b1"])
        // Held: nothing more to claim, for anyone, until the lease ends.
        #expect(try await store.claim(now: 50, limit: 10, claimant: "y", leaseUntil: 2_050, excluding: []).isEmpty)
        #expect(try await store.nextDue(excluding: []) == nil)
        // Delivered: the next of that subscription becomes claimable.
        let settled = try await store.settle([.delivered(id: first[0].id)], claimant: "x", now: 20)
        #expect(settled.lost == 0)
        #expect(try await store.nextDue(excluding: []) == 10)
        #expect(try await store.claim(now: 20, limit: 10, claimant: "x", leaseUntil: 2_010, excluding: [SenderKey(app: "toto", kind: .fcm)]).isEmpty)
        let second = try await store.claim(now: 20, limit: 10, claimant: "x", leaseUntil: 2_010, excluding: [])
        #expect(second.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["a2"])
        // An expired lease lets another claimant take it; the first one's settlement is then lost.
        try await passClaims(kind, milliseconds: 2_000)
        let taken = try await store.claim(now: 2_011, limit: 10, claimant: "y", leaseUntil: 4_000, excluding: [])
        #expect(Set(taken.map(\.id)) == Set([second[0].id, first[1].id]))
        let late = try await store.settle([.delivered(id: second[0].id)], claimant: "x", now: 2_012)
        #expect(late.lost == 1)
        #expect(try await store.notifications(limit: 10).count == 2)
        // Released but those kept (the ones the claimant knows it holds); others' claims stay.
        #expect(try await store.releaseClaims(claimant: "y", keeping: [taken[0].id]) == 1)
        #expect(try await store.releaseClaims(claimant: "x", keeping: []) == 0)
        #expect(try await store.claim(now: 2_012, limit: 10, claimant: "w", leaseUntil: 4_000, excluding: []).map(\.id) == [taken[1].id])
        #expect(try await store.releaseClaims(claimant: "y") == 1)
        #expect(try await store.releaseClaims(claimant: "w") == 1)
        #expect(try await store.claim(now: 2_012, limit: 1, claimant: "z", leaseUntil: 4_000, excluding: []).count == 1)
    }

    @Test("a retry keeps its place and its schedule; a newer value waiting takes it over", arguments: StoreKind.all)
    func retries(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let v = makeSubscription(path: "/v", mode: .value)
        let hv = try await stored(store, v)
        try await queue(store, now: 10, [entry(v, hv, .value, payload: "1")])
        let claimed = try await store.claim(now: 10, limit: 10, claimant: "x", leaseUntil: 60_000, excluding: [])
        // While it is in flight a newer value arrives: it queues behind (the in-flight one is not replaced).
        try await queue(store, now: 11, [entry(v, hv, .value, payload: "2")])
        #expect(try await payloads(store) == ["1", "2"])
        // The retry gives way to the newer value, which inherits the schedule.
        let result = try await store.settle([.retry(id: claimed[0].id, nextAttemptAt: 1_010, firstAttemptAt: 10, attempts: 1)], claimant: "x", now: 12)
        #expect(result.superseded == 1)
        let rows = try await store.notifications(limit: 10)
        #expect(rows.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["2"])
        #expect(rows[0].nextAttemptAt == 1_010 && rows[0].attempts == 1 && rows[0].firstAttemptAt == 10)
        #expect(try await store.claim(now: 1_009, limit: 10, claimant: "x", leaseUntil: 2_000, excluding: []).isEmpty)
        #expect(try await store.nextDue(excluding: []) == 1_010)
        let again = try await store.claim(now: 1_010, limit: 10, claimant: "x", leaseUntil: 2_000, excluding: [])
        #expect(again.count == 1)
        // A plain retry (nothing newer) is rescheduled in place.
        _ = try await store.settle([.retry(id: again[0].id, nextAttemptAt: 3_010, firstAttemptAt: 10, attempts: 2)], claimant: "x", now: 1_011)
        let rescheduled = try await store.notifications(limit: 10)
        #expect(rescheduled.map(\.id) == [again[0].id] && rescheduled[0].attempts == 2 && rescheduled[0].nextAttemptAt == 3_010)
        // Released (paused application): back as it was, no attempt counted.
        let third = try await store.claim(now: 3_010, limit: 10, claimant: "x", leaseUntil: 4_000, excluding: [])
        _ = try await store.settle([.release(id: third[0].id)], claimant: "x", now: 3_011)
        #expect(try await store.notifications(limit: 10)[0].attempts == 2)
        // Postponed (claimed while its sender was held): due again at the time given, at the
        // earliest, no attempt counted; a time before its own schedule leaves the schedule.
        let fourth = try await store.claim(now: 3_012, limit: 10, claimant: "x", leaseUntil: 4_000, excluding: [])
        _ = try await store.settle([.postpone(id: fourth[0].id, until: 9_000)], claimant: "x", now: 3_013)
        var postponed = try await store.notifications(limit: 10)[0]
        #expect(postponed.attempts == 2 && postponed.nextAttemptAt == 9_000 && postponed.firstAttemptAt == 10)
        #expect(try await store.claim(now: 8_999, limit: 10, claimant: "x", leaseUntil: 10_000, excluding: []).isEmpty)
        let fifth = try await store.claim(now: 9_000, limit: 10, claimant: "x", leaseUntil: 10_000, excluding: [])
        #expect(try await store.settle([.postpone(id: fifth[0].id, until: 5)], claimant: "y", now: 9_001).lost == 1)
        _ = try await store.settle([.postpone(id: fifth[0].id, until: 5)], claimant: "x", now: 9_001)
        postponed = try await store.notifications(limit: 10)[0]
        #expect(postponed.nextAttemptAt == 9_000)
    }

    @Test("discard drops what waits for the subscription and keeps it; drop removes one", arguments: StoreKind.all)
    func discardAndDrop(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let c = makeSubscription(path: "/c", mode: .childEvent)
        let hc = try await stored(store, c)
        try await queue(store, now: 10, [entry(c, hc, .childEvent, payload: "1"), entry(c, hc, .childEvent, payload: "2"), entry(c, hc, .childEvent, payload: "3")])
        var claimed = try await store.claim(now: 10, limit: 10, claimant: "x", leaseUntil: 60_000, excluding: [])
        _ = try await store.settle([.drop(id: claimed[0].id)], claimant: "x", now: 11)
        #expect(try await payloads(store) == ["2", "3"])
        claimed = try await store.claim(now: 11, limit: 10, claimant: "x", leaseUntil: 60_000, excluding: [])
        let result = try await store.settle([.discard(id: claimed[0].id, subscriptionHandle: hc)], claimant: "x", now: 12)
        #expect(result.discarded == 2)
        #expect(try await payloads(store).isEmpty)
        #expect(try await store.subscription(id: c.id) != nil)
    }

    @Test("revoke deletes the subscription and what waits for it, then queues its revoke notification", arguments: StoreKind.all)
    func revoke(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let c = makeSubscription(path: "/c", mode: .childEvent)
        let other = makeSubscription(path: "/o", context: "token-9", mode: .childEvent)
        let hc = try await stored(store, c)
        let ho = try await stored(store, other)
        try await queue(store, now: 10, [entry(c, hc, .childEvent, payload: "1"), entry(c, hc, .childEvent, payload: "2"), entry(other, ho, .childEvent, payload: "o")])
        let claimed = try await store.claim(now: 10, limit: 10, claimant: "x", leaseUntil: 60_000, excluding: [])
        let notice = entry(c, hc, .revoke, payload: "revoke")
        let result = try await store.settle(
            [.revoke(id: claimed[0].id, subscriptionHandle: hc, notification: notice), .delivered(id: claimed[1].id)], claimant: "x", now: 20)
        #expect(result.revoked == [hc])
        #expect(try await store.subscription(id: c.id) == nil)
        let rows = try await store.notifications(limit: 10)
        #expect(rows.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["revoke"])
        #expect(rows[0].createdAt == 20 && rows[0].nextAttemptAt == 20)
        // The revoke notification itself refused for good: it goes, nothing more is queued.
        let revokeClaim = try await store.claim(now: 20, limit: 10, claimant: "x", leaseUntil: 60_000, excluding: [])
        let again = try await store.settle([.revoke(id: revokeClaim[0].id, subscriptionHandle: hc, notification: notice)], claimant: "x", now: 21)
        #expect(again.revoked.isEmpty)
        #expect(try await store.notifications(limit: 10).isEmpty)
    }

    @Test("claims survive a reopen; releasing every claim makes them claimable again", arguments: StoreKind.all)
    func reopen(kind: StoreKind) async throws {
        let made = try await kind.make()
        let store = made.store
        let v = makeSubscription(path: "/v", mode: .value)
        let hv = try await stored(store, v)
        try await queue(store, now: 10, [entry(v, hv, .value, payload: "1")])
        // A lease of 10 minutes: on PostgreSQL a claim lasts `leaseUntil - now` of the database's
        // clock, and a loaded machine can take a second to reopen.
        _ = try await store.claim(now: 10, limit: 10, claimant: "x", leaseUntil: 600_000, excluding: [])
        let reopened = try await made.reopen()
        #expect(try await reopened.claim(now: 11, limit: 10, claimant: "y", leaseUntil: 1_000, excluding: []).isEmpty)
        #expect(try await reopened.releaseClaims(claimant: nil) == 1)
        #expect(try await reopened.claim(now: 11, limit: 10, claimant: "y", leaseUntil: 1_000, excluding: []).count == 1)
    }
}
