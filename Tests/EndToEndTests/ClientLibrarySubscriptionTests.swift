import Foundation
import PushCore
import PushDispatchClient
import PushJOSE
import PushTestSupport
import Synchronization
import Testing

/// The library's subscription management against `pushdispatch run`: token refresh, cancel,
/// unsubscribe, refresh, and the errors the service answers.
@Suite("The app library manages subscriptions against pushdispatch run", .processLevel, .serialized)
struct ClientLibrarySubscriptionTests {
    @Test("updateDeviceTokenInAllSubscriptions moves every subscription of the old token, and only those; the next record goes to the new token")
    func tokenRefresh() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        let keyStore = InMemoryDeviceKeyStore()
        let push = try harness.client(device: try .fcm("old-token"), keyStore: keyStore)
        let tablet = try harness.client(device: try .fcm("tablet-token"))
        let before = [
            try await push.node(for: "/t/1").subscribeThroughNotifications(descriptor: .init(mode: .value, encryption: .endToEnd())),
            try await push.node(for: "/t/2").subscribeThroughNotifications(descriptor: .init(mode: .childEvent, format: .v1)),
            try await push.node(for: "/t/3").subscribeThroughNotifications(),
        ]
        try await tablet.node(for: "/t/1").subscribeThroughNotifications(descriptor: .init(mode: .value))
        try await push.node(for: "/t/1").subscribeThroughWebhook("orders", context: "crm")

        let newToken = try DeviceToken.fcm("new-token")
        // (In the order the service lists them: by id.)
        let moved = try await push.updateDeviceTokenInAllSubscriptions(newToken).sorted { $0.path < $1.path }
        #expect(moved.map(\.path) == ["/t/1", "/t/2", "/t/3"])
        #expect(moved.map(\.mode) == before.map(\.mode) && moved.map(\.format) == before.map(\.format))
        #expect(moved.allSatisfy { $0.target == .device(newToken) })
        #expect(zip(moved, before).allSatisfy { $0.expiresAt == $1.expiresAt && $0.id != $1.id })
        #expect(await push.deviceToken() == newToken)
        let all = try await push.subscriptions()
        #expect(!all.contains { $0.target == .device(try! .fcm("old-token")) })
        #expect(all.filter { $0.target == .device(newToken) }.count == 3)
        #expect(all.filter { $0.target == .device(try! .fcm("tablet-token")) }.count == 1)
        #expect(all.filter { $0.target == .webhook(name: "orders", context: "crm") }.count == 1)

        // The encrypted subscription kept its device key: the next record is read with it.
        try harness.write([("toto", "put", "/t/1", #"{"n":1}"#)])
        let received = try await harness.fcmData("new-token", count: 1)
        let notification = try await push.notification(from: received[0])
        #expect(notification.event == .value(["n": 1]) && notification.protection == .endToEnd)
        _ = try await harness.fcmData("tablet-token", count: 1)
        #expect(harness.fcmMessages("old-token") == 0)
        // Nothing left to move: the same token again is a no-op.
        #expect(try await push.updateDeviceTokenInAllSubscriptions(newToken).isEmpty)
    }

    @Test("a subscription is cancelled, refreshed, unsubscribed by node or all at once; nothing is delivered to what was removed")
    func cancelAndUnsubscribe() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        let push = try harness.client(device: try .fcm("cancel-device"))
        let one = try await push.node(for: "/c/1").subscribeThroughNotifications(descriptor: .init(mode: .value))
        try await push.node(for: "/c/2").subscribeThroughNotifications(descriptor: .init(mode: .value))
        let three = try await push.node(for: "/c/3").subscribeThroughNotifications(descriptor: .init(mode: .value))
        try await push.node(for: "/c/1").subscribeThroughWebhook("orders", context: "kept")

        try await one.cancel()
        #expect(!(try await push.subscriptions()).contains { $0.id == one.id })
        await #expect(throws: PushClientError(.notFound, "")) { try await one.cancel() }
        try await push.node(for: "/c/2").unsubscribeThroughNotifications()
        try await push.node(for: "/c/2").unsubscribeThroughNotifications()  // nothing left: not an error

        let later = Date().addingTimeInterval(2 * 86_400)
        let refreshed = try await three.refresh(until: later)
        #expect(refreshed.id == three.id && abs(refreshed.expiresAt.timeIntervalSince(later)) <= 1)
        let byDefault = try await refreshed.refresh()
        #expect(byDefault.expiresAt > Date().addingTimeInterval(6 * 86_400))

        #expect(try await push.unsubscribeFromAllThroughNotifications() == 1)
        let left = try await push.subscriptions()
        #expect(left.map(\.target) == [.webhook(name: "orders", context: "kept")])

        // A sentinel on another device: once it is delivered, the records before it were matched.
        let sentinel = try harness.client(device: try .fcm("sentinel-device"))
        try await sentinel.node(for: "/c/s").subscribeThroughNotifications()
        try harness.write([
            ("toto", "put", "/c/1", "1"), ("toto", "put", "/c/2", "2"), ("toto", "put", "/c/3", "3"), ("toto", "put", "/c/s", "4"),
        ])
        _ = try await harness.fcmData("sentinel-device", count: 1)
        try await ServiceEndToEndTests.eventually("the webhook") { harness.fakes.received(provider: "webhook").count == 1 }
        #expect(harness.fcmMessages("cancel-device") == 0)
    }

    @Test("a uid with characters a URL must escape (space, /, ?, #, %, dots, non-ASCII) works, encoded once")
    func unusualUID() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        for uid in ["ann é/1 ?#%41", "..", "a.b"] {
            let push = try harness.client(uid: uid, device: try .fcm("uid-device"))
            let subscription = try await push.node(for: "/u").subscribeThroughNotifications()
            #expect(try await push.subscriptions() == [subscription], "\(uid)")
            try await subscription.cancel()
            #expect(try await push.subscriptions().isEmpty, "\(uid)")
        }
    }

    @Test("errors say what the service answered: permission_denied, conflict, too_many_subscriptions, unauthorized, forbidden, bad_request; never the token")
    func errors() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        let push = try harness.client(uid: "carol", device: try .fcm("errors-device"))
        func code(_ body: () async throws -> Void) async -> PushClientError? {
            do {
                try await body()
                return nil
            } catch {
                return error as? PushClientError
            }
        }
        // 403 permission_denied: the read rules refuse /private.
        let denied = await code { try await push.node(for: "/private/x").subscribeThroughNotifications() }
        #expect(denied?.code == .permissionDenied && denied?.status == 403 && denied?.message.contains("/private/x") == true, "\(String(describing: denied))")
        // 409 conflict: the same node twice without allowsUpdate.
        try await push.node(for: "/e/dup").subscribeThroughNotifications()
        let conflict = await code { try await push.node(for: "/e/dup").subscribeThroughNotifications(descriptor: .init(allowsUpdate: false)) }
        #expect(conflict?.code == .conflict)
        // 400 bad_request: a shared key the application does not have.
        let badKey = await code {
            try await push.node(for: "/e/k").subscribeThroughNotifications(descriptor: .init(encryption: .sharedKey(kid: "no-such-key")))
        }
        #expect(badKey?.code == .badRequest && badKey?.message.contains("no-such-key") == true, "\(String(describing: badKey))")
        // 429 too_many_subscriptions: maxPerUser is 12.
        for index in 2...12 { try await push.node(for: "/e/n\(index)").subscribeThroughNotifications() }
        let tooMany = await code { try await push.node(for: "/e/n13").subscribeThroughNotifications() }
        #expect(tooMany?.code == .tooManySubscriptions && tooMany?.status == 429)

        // 401: a token the service refuses, asked for once more with forceRefresh, then refused.
        let calls = CallLog()
        let refused = try harness.client(
            uid: "carol", device: try .fcm("errors-device"),
            credentials: { refresh in
                calls.append(refresh)
                return Credentials(uid: "carol", token: "not.a.token-secret-value")
            })
        let unauthorized = await code { try await refused.node(for: "/e/x").subscribeThroughNotifications() }
        #expect(unauthorized?.code == .unauthorized && calls.values == [false, true])
        #expect(unauthorized.map { !$0.description.contains("secret-value") } == true)
        // 403 forbidden: a valid token for another user.
        let bobToken = try ClientLibraryHarness.token("bob")
        let forbidden = try harness.client(uid: "carol", device: try .fcm("errors-device"), credentials: { _ in Credentials(uid: "carol", token: bobToken) })
        #expect(await code { _ = try await forbidden.subscriptions() }?.code == .forbidden)
        // No service: a transport error, not a status.
        let nowhere = try PushDispatch(
            .init(baseURL: URL(string: "http://127.0.0.1:9")!, app: "toto", credentials: { _ in Credentials(uid: "carol", token: "t") }))
        #expect(await code { _ = try await nowhere.subscriptions() }?.code == .transport)
        // Refused before anything is sent.
        #expect(await code { try await push.node(for: "/e").subscribeThroughNotifications(descriptor: .init(format: .v1, encryption: .endToEnd())) }?.code == .invalidArgument)
        #expect(throws: PushClientError(.invalidArgument, "")) {
            try PushDispatch(.init(baseURL: URL(string: "http://push.example.com")!, app: "toto", credentials: { _ in Credentials(uid: "u", token: "t") }))
        }
    }
}

/// What a credentials provider was asked, in order.
final class CallLog: Sendable {
    private let log = Mutex<[Bool]>([])
    func append(_ value: Bool) { log.withLock { $0.append(value) } }
    var values: [Bool] { log.withLock { $0 } }
}
