import Foundation
import PushCore
import PushContracts
@testable import PushStore
import Testing

/// The contract of the delivery history (SPEC §13.2) on both stores: attempts written with their
/// settlements, skips with their batches, discarded notifications kept and recovered, searches,
/// and the bounds.
@Suite("History store contract")
struct HistoryStoreContractTests {
    func stored(_ store: any FullStore, _ subscription: Subscription) async throws -> Int64 {
        guard case .created(let created) = try await store.save(subscription, allowUpdate: false), let handle = created.handle else {
            throw StoreError.corrupt("not created")
        }
        return handle
    }

    func commit(_ store: any FullStore, now: Int64, _ operations: [OutboxOperation], skips: [RecordSkip] = []) async throws {
        var batch = CommitBatch(now: now)
        batch.operations = operations
        batch.keepsHistory = true
        batch.skips = skips
        _ = try await store.commit(batch)
    }

    func entry(_ subscription: Subscription, _ handle: Int64, _ kind: NotificationKind, seq: Int64) -> OutboxEntry {
        OutboxEntry(
            app: subscription.app, subscriptionHandle: handle, subscriptionID: subscription.id, kind: subscription.kind,
            target: subscription.tuple.context, destination: subscription.tuple.destination, notification: kind, payload: Array("s\(seq)".utf8),
            recordSeq: seq)
    }

    func attempt(_ claimed: StoredNotification, at: Int64, outcome: DeliveryAttempt.Outcome, status: Int? = 200, nextAt: Int64? = nil) -> DeliveryAttempt {
        DeliveryAttempt(
            notification: claimed.id, subscription: claimed.entry.subscriptionID, app: claimed.entry.app, seq: claimed.entry.recordSeq, provider: "fcm",
            destination: nil, attempt: claimed.attempts + 1, at: at, status: status, reason: outcome == .delivered ? nil : "UNAVAILABLE",
            latencyMs: 12, outcome: outcome, nextAt: nextAt)
    }

    @Test("attempts are read back by subscription (newest first, paged) and by record, with what got nothing and why", arguments: StoreKind.all)
    func attemptsAndFates(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let a = makeSubscription(path: "/a", context: "token-a")
        let b = makeSubscription(path: "/b", context: "token-b", mode: .childEvent)
        let (ha, hb) = (try await stored(store, a), try await stored(store, b))
        // Record 1 concerns a and b; record 2 replaces a's waiting value: record 1 is coalesced for a.
        try await commit(store, now: 10, [.notify(entry(a, ha, .value, seq: 1)), .notify(entry(b, hb, .childEvent, seq: 1))])
        try await commit(store, now: 20, [.notify(entry(a, ha, .value, seq: 2))])
        // Within one batch: record 4 takes record 3's place (b is childEvent: both stay).
        try await commit(store, now: 25, [.notify(entry(a, ha, .value, seq: 3)), .notify(entry(a, ha, .value, seq: 4))])
        #expect(try await store.fate(app: "toto", seq: 3).nothing.map(\.why) == [.coalesced])
        let claimed = try await store.claim(now: 30, limit: 10, claimant: "me", leaseUntil: 60_000, excluding: [])
        let byHandle = Dictionary(grouping: claimed, by: \.entry.subscriptionHandle)
        let first = try #require(byHandle[ha]?.first)
        let second = try #require(byHandle[hb]?.first)
        #expect(first.entry.recordSeq == 4)
        _ = try await store.settle(
            [.retry(id: first.id, nextAttemptAt: 40, firstAttemptAt: 30, attempts: 1), .delivered(id: second.id)],
            attempts: [attempt(first, at: 31, outcome: .retry, status: 503, nextAt: 40), attempt(second, at: 31, outcome: .delivered)],
            claimant: "me", now: 31)
        let again = try await store.claim(now: 40, limit: 10, claimant: "me", leaseUntil: 60_000, excluding: [])
        let retried = try #require(again.first { $0.entry.subscriptionHandle == ha })
        _ = try await store.settle([.delivered(id: retried.id)], attempts: [attempt(retried, at: 41, outcome: .delivered)], claimant: "me", now: 41)

        let history = try await store.attempts(app: "toto", subscription: a.id, cursor: nil, limit: 10)
        #expect(history.items.map(\.outcome) == [.delivered, .retry])
        #expect(history.items.map(\.attempt) == [2, 1])
        #expect(history.items[1] == attempt(first, at: 31, outcome: .retry, status: 503, nextAt: 40))
        #expect(history.nextCursor == nil)
        let page = try await store.attempts(app: "toto", subscription: a.id, cursor: nil, limit: 1)
        #expect(page.items.map(\.outcome) == [.delivered])
        let rest = try await store.attempts(app: "toto", subscription: a.id, cursor: try #require(page.nextCursor), limit: 1)
        #expect(rest.items.map(\.outcome) == [.retry] && rest.nextCursor == nil)
        #expect(try await store.attempts(app: "other", subscription: a.id, cursor: nil, limit: 10).items.isEmpty)

        let one = try await store.fate(app: "toto", seq: 1)
        #expect(one.notifications.map(\.subscription) == [b.id])
        #expect(one.notifications.first?.state == .settled && one.notifications.first?.attempts.map(\.outcome) == [.delivered])
        #expect(one.nothing.map(\.subscription) == [a.id] && one.nothing.map(\.why) == [.coalesced])
        #expect(try await store.fate(app: "toto", seq: 2).nothing.map(\.why) == [.coalesced])
        let four = try await store.fate(app: "toto", seq: 4)
        #expect(four.notifications.count == 1 && four.notifications[0].attempts.map(\.outcome) == [.delivered, .retry])
        #expect(try await store.fate(app: "toto", seq: 99) == RecordFate(notifications: [], nothing: []))
    }

    @Test("a waiting notification is shown waiting; revocations and gone subscriptions are noted with the batch's own skips", arguments: StoreKind.all)
    func skips(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let a = makeSubscription(path: "/a", context: "token-a")
        let b = makeSubscription(path: "/b", context: "token-b")
        let (ha, hb) = (try await stored(store, a), try await stored(store, b))
        try await commit(store, now: 10, [.notify(entry(a, ha, .value, seq: 1)), .notify(entry(b, hb, .value, seq: 1))])
        #expect(try await store.fate(app: "toto", seq: 1).notifications.map(\.state) == [.waiting, .waiting])
        #expect(try await store.fate(app: "toto", seq: 1).notifications.map(\.kind) == ["value", "value"])
        // Record 2 revokes a (denied: the engine's skip) and drops its waiting value from record 1;
        // b expires; record 3 reaches a, gone by then.
        try await commit(
            store, now: 20,
            [.revoke(handle: ha, notification: entry(a, ha, .revoke, seq: 2), condition: .exists), .revoke(handle: hb, notification: nil, condition: .expiredBy(2_000_000_001))],
            skips: [RecordSkip(app: "toto", seq: 2, subscription: a.id, why: .denied, at: 20)])
        try await commit(store, now: 30, [.notify(entry(a, ha, .value, seq: 3))])
        let one = try await store.fate(app: "toto", seq: 1)
        #expect(one.notifications.isEmpty)
        #expect(Set(one.nothing.map { "\($0.subscription == a.id ? "a" : "b"):\($0.why.rawValue)" }) == ["a:revoked", "b:expired"])
        let two = try await store.fate(app: "toto", seq: 2)
        #expect(two.notifications.map(\.kind) == ["revoke"] && two.nothing.map(\.why) == [.denied])
        #expect(try await store.fate(app: "toto", seq: 3).nothing.map(\.why) == [.revoked])
    }

    @Test("discarded notifications are kept (history on) and recovered oldest first, once, for subscriptions that still exist", arguments: StoreKind.all)
    func discardAndRecover(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let a = makeSubscription(path: "/a", context: "token-a", mode: .childEvent)
        let gone = makeSubscription(path: "/g", context: "token-g", mode: .childEvent)
        let hook = makeSubscription(kind: .webhook, path: "/w", context: nil, destination: "orders", mode: .childEvent)
        let (ha, hg, hw) = (try await stored(store, a), try await stored(store, gone), try await stored(store, hook))
        try await commit(store, now: 10, [.notify(entry(a, ha, .childEvent, seq: 1)), .notify(entry(gone, hg, .childEvent, seq: 1)), .notify(entry(hook, hw, .childEvent, seq: 1))])
        try await commit(store, now: 11, [.notify(entry(a, ha, .childEvent, seq: 2)), .notify(entry(hook, hw, .childEvent, seq: 2))])
        let claimed = try await store.claim(now: 20, limit: 10, claimant: "me", leaseUntil: 60_000, excluding: [])
        let heads = claimed.filter { $0.entry.subscriptionHandle == ha || $0.entry.subscriptionHandle == hg }
        let result = try await store.settle(
            heads.map { .discard(id: $0.id, subscriptionHandle: $0.entry.subscriptionHandle) }, attempts: heads.map { attempt($0, at: 21, outcome: .discarded) },
            claimant: "me", now: 21)
        #expect(result.discarded == 3)
        #expect(try await store.fate(app: "toto", seq: 2).notifications.map(\.state) == [.discarded, .waiting])
        // The paused webhook's waiting one is discarded too, kept.
        _ = try await store.releaseClaims(claimant: "me")
        #expect(try await store.discardWaiting(for: SenderKey(app: "toto", kind: .webhook, destination: "orders"), createdBefore: 100, now: 30, keeping: true) == 2)
        _ = try await store.remove(app: "toto", uid: "u1", id: gone.id)
        #expect(try await store.recover(RecoveryFilter(app: "toto", kind: .webhook, destination: "audit", since: 0), now: 50) == 0)
        #expect(try await store.recover(RecoveryFilter(app: "other", since: 0), now: 50) == 0)
        #expect(try await store.recover(RecoveryFilter(app: "toto", kind: .fcm, since: 22), now: 50) == 0)
        #expect(try await store.recover(RecoveryFilter(app: "toto", kind: .fcm, since: 21), now: 50) == 2)
        #expect(try await store.recover(RecoveryFilter(app: "toto", since: 0), now: 50) == 2)
        #expect(try await store.recover(RecoveryFilter(app: "toto", since: 0), now: 50) == 0)
        let recovered = try await store.claim(now: 50, limit: 10, claimant: "me", leaseUntil: 60_000, excluding: [])
        #expect(Set(recovered.map { String(decoding: $0.entry.payload, as: UTF8.self) }) == ["s1"])
        #expect(recovered.count == 2 && recovered.allSatisfy { $0.attempts == 0 && $0.firstAttemptAt == nil })
        // Order per subscription: s1 before s2.
        for notification in recovered { _ = try await store.settle([.delivered(id: notification.id)], claimant: "me", now: 51) }
        let next = try await store.claim(now: 52, limit: 10, claimant: "me", leaseUntil: 60_000, excluding: [])
        #expect(next.map { String(decoding: $0.entry.payload, as: UTF8.self) } == ["s2", "s2"])
    }

    @Test("without history nothing is kept: a discard deletes, a commit notes nothing", arguments: StoreKind.all)
    func off(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let a = makeSubscription(path: "/a", context: "token-a")
        let ha = try await stored(store, a)
        var batch = CommitBatch(now: 10)
        batch.operations = [.notify(entry(a, ha, .value, seq: 1))]
        _ = try await store.commit(batch)
        batch.operations = [.notify(entry(a, ha, .value, seq: 2))]
        _ = try await store.commit(batch)
        let claimed = try await store.claim(now: 20, limit: 10, claimant: "me", leaseUntil: 60_000, excluding: [])
        _ = try await store.settle([.discard(id: claimed[0].id, subscriptionHandle: ha)], claimant: "me", now: 21)
        #expect(try await store.fate(app: "toto", seq: 1) == RecordFate(notifications: [], nothing: []))
        #expect(try await store.fate(app: "toto", seq: 2) == RecordFate(notifications: [], nothing: []))
        #expect(try await store.recover(RecoveryFilter(app: "toto", since: 0), now: 50) == 0)
    }

    @Test("subscriptions are found by uid, path or whole token, paged, each with its last attempt", arguments: StoreKind.all)
    func search(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let subscriptions = [
            makeSubscription(uid: "u1", path: "/a", context: "token-a"), makeSubscription(uid: "u1", path: "/b", context: "token-b"),
            makeSubscription(uid: "u2", path: "/a", context: "token-c"), makeSubscription(app: "other", uid: "u1", path: "/a", context: "token-a"),
        ]
        var handles: [Int64] = []
        for subscription in subscriptions { handles.append(try await stored(store, subscription)) }
        try await commit(store, now: 10, [.notify(entry(subscriptions[0], handles[0], .value, seq: 1))])
        let claimed = try await store.claim(now: 20, limit: 10, claimant: "me", leaseUntil: 60_000, excluding: [])
        _ = try await store.settle([.delivered(id: claimed[0].id)], attempts: [attempt(claimed[0], at: 21, outcome: .delivered)], claimant: "me", now: 21)

        let byUID = try await store.subscriptions(matching: SubscriptionQuery(app: "toto", uid: "u1"), cursor: nil, limit: 10)
        #expect(byUID.items.map(\.subscription.id) == [subscriptions[0].id, subscriptions[1].id] && byUID.nextCursor == nil)
        #expect(byUID.items.map { $0.lastAttempt?.outcome } == [.delivered, nil])
        let byPath = try await store.subscriptions(matching: SubscriptionQuery(path: "/a"), cursor: nil, limit: 2)
        #expect(byPath.items.map(\.subscription.id) == [subscriptions[0].id, subscriptions[2].id])
        let more = try await store.subscriptions(matching: SubscriptionQuery(path: "/a"), cursor: try #require(byPath.nextCursor), limit: 2)
        #expect(more.items.map(\.subscription.id) == [subscriptions[3].id] && more.nextCursor == nil)
        #expect(try await store.subscriptions(matching: SubscriptionQuery(token: "token-a"), cursor: nil, limit: 10).items.count == 2)
        #expect(try await store.subscriptions(matching: SubscriptionQuery(token: "token-"), cursor: nil, limit: 10).items.isEmpty)
    }

    @Test("pruning: older than maxAge and beyond maxRows go, oldest first; off removes everything", arguments: StoreKind.all)
    func pruning(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let a = makeSubscription(path: "/a", context: "token-a", mode: .childEvent)
        let ha = try await stored(store, a)
        for seq in Int64(1)...12 {
            try await commit(store, now: seq * 100, [.notify(entry(a, ha, .childEvent, seq: seq))], skips: [RecordSkip(app: "toto", seq: seq, subscription: "x", why: .denied, at: seq * 100)])
            let claimed = try await store.claim(now: seq * 100, limit: 1, claimant: "me", leaseUntil: 1_000_000, excluding: [])
            _ = try await store.settle([.delivered(id: claimed[0].id)], attempts: [attempt(claimed[0], at: seq * 100, outcome: .delivered)], claimant: "me", now: seq * 100)
        }
        func count() async throws -> Int { try await store.attempts(app: "toto", subscription: a.id, cursor: nil, limit: 100).items.count }
        #expect(try await count() == 12)
        // Older than 1000 ms at 1250: the attempts at 100 and 200 go (and their skips).
        #expect(try await store.pruneHistory(now: 1_250, limits: HistoryLimits(maxAge: 1_000, maxRows: 100)) == 4)
        #expect(try await count() == 10)
        let (two, three) = (try await store.fate(app: "toto", seq: 2), try await store.fate(app: "toto", seq: 3))
        #expect(two.nothing.isEmpty && !three.nothing.isEmpty)
        // At most 4 rows: the newest stay.
        _ = try await store.pruneHistory(now: 1_250, limits: HistoryLimits(maxAge: 1_000, maxRows: 4))
        let left = try await store.attempts(app: "toto", subscription: a.id, cursor: nil, limit: 100).items
        #expect(left.map(\.seq) == [12, 11, 10, 9])
        // Off: everything.
        _ = try await store.pruneHistory(now: 1_250, limits: .off)
        #expect(try await count() == 0)
        #expect(try await store.fate(app: "toto", seq: 12).nothing.isEmpty)
    }

    @Test("a notification that took the place of 300 records' (in batches of one): each record is coalesced for it, waiting, after its delivery, and after pruning no more", arguments: StoreKind.all)
    func manyCoalesced(kind: StoreKind) async throws {
        let store = try await kind.make().store
        let a = makeSubscription(path: "/a", context: "token-a")
        let b = makeSubscription(path: "/b", context: "token-b")
        let (ha, hb) = (try await stored(store, a), try await stored(store, b))
        // a's value replaced 299 times, one record per batch (more than one list holds); b gets
        // record 7 alone: record 7 must not be found coalesced for b, nor 17 for a by its digits.
        for seq in Int64(1)...300 {
            var operations: [OutboxOperation] = [.notify(entry(a, ha, .value, seq: seq))]
            if seq == 7 { operations.append(.notify(entry(b, hb, .value, seq: seq))) }
            try await commit(store, now: seq, operations)
        }
        func coalescedFor(_ seq: Int64) async throws -> [String] {
            try await store.fate(app: "toto", seq: seq).nothing.filter { $0.why == .coalesced }.map(\.subscription)
        }
        for seq in [Int64(1), 7, 17, 150, 299] { #expect(try await coalescedFor(seq) == [a.id], "record \(seq), waiting") }
        #expect(try await coalescedFor(300).isEmpty, "the notification holds record 300")
        #expect(try await coalescedFor(301).isEmpty)
        #expect(try await coalescedFor(0).isEmpty)
        let seven = try await store.fate(app: "toto", seq: 7)
        #expect(seven.notifications.map(\.subscription) == [b.id])

        let claimed = try await store.claim(now: 400, limit: 10, claimant: "me", leaseUntil: 60_000, excluding: [])
        #expect(claimed.count == 2)
        _ = try await store.settle(
            claimed.map { .delivered(id: $0.id) }, attempts: claimed.map { attempt($0, at: 401, outcome: .delivered) }, claimant: "me", now: 401)
        for seq in Int64(1)...299 where seq % 37 == 1 || seq == 299 {
            #expect(try await coalescedFor(seq) == [a.id], "record \(seq), after the delivery")
        }
        #expect(try await coalescedFor(300).isEmpty)
        // Pruned as the other history: all of it once older than maxAge.
        _ = try await store.pruneHistory(now: 100_000, limits: HistoryLimits(maxAge: 1_000, maxRows: 100))
        #expect(try await coalescedFor(1).isEmpty)
        #expect(try await coalescedFor(299).isEmpty)
    }
}
