import Foundation
import PushCore
import PushJSON
import PushDispatchClient
import PushJOSE
import PushTestSupport
import Testing

/// The app library (PushDispatchClient) against the real `pushdispatch run`, on loopback, with
/// the fake providers: what a device subscribes, what the fake FCM or HMS received, read back by
/// the library.
@Suite("The app library against pushdispatch run", .processLevel, .serialized)
struct ClientLibraryEndToEndTests {
    static func sharedKeys() throws -> [JWK] {
        let ring = try KeyRing(jwkSetText: Array(try Data(contentsOf: ClientLibraryHarness.keyset)))
        return ["enc-dir", "enc-kw"].compactMap { ring.key(kid: $0, use: .encryption) }
    }

    /// The notifications in `maps`, read by `client`, by path.
    static func read(_ maps: [[String: String]], with client: PushDispatch) async throws -> [String: [PushNotification]] {
        var byPath: [String: [PushNotification]] = [:]
        for map in maps {
            let notification = try await client.notification(from: map)
            byPath[notification.path, default: []].append(notification)
        }
        return byPath
    }

    @Test("subscribe in every format; the data maps FCM and HMS received read back as the events written (v1, signed, end to end, shared key)")
    func subscribeAndRead() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        let device = try DeviceToken.fcm("lib-device-1")
        let keyStore = InMemoryDeviceKeyStore()
        let push = try harness.client(device: device, keyStore: keyStore, sharedKeys: try Self.sharedKeys())
        let subscriptions = [
            try await push.node(for: "/v1/value").subscribeThroughNotifications(descriptor: .init(mode: .value, format: .v1)),
            try await push.node(for: "/v2/signed").subscribeThroughNotifications(descriptor: .init(mode: .value)),
            try await push.node(for: "v2//e2e/.").subscribeThroughNotifications(descriptor: .init(mode: .value, encryption: .endToEnd())),
            try await push.node(for: "/v2/kw").subscribeThroughNotifications(
                descriptor: .init(mode: .childEvent, encryption: .endToEnd(.ecdhESA256KW, content: .a128gcm))),
            try await push.node(for: "/v2/shared").subscribeThroughNotifications(
                descriptor: .init(mode: .value, encryption: .sharedKey(kid: "enc-kw", algorithm: .a256KW))),
            try await push.node(for: "/v2/wake").subscribeThroughNotifications(),
        ]
        #expect(subscriptions.map(\.path) == ["/v1/value", "/v2/signed", "/v2/e2e", "/v2/kw", "/v2/shared", "/v2/wake"])
        #expect(subscriptions.allSatisfy { $0.target == .device(device) && $0.expiresAt > Date() })
        // The device key was made once and kept in the store; the service holds its public half.
        let stored = try #require(await keyStore.loadKey())
        #expect(String(decoding: stored, as: UTF8.self).contains("\"d\":"))
        #expect(try await push.devicePublicKey().kid == (try JWK(json: try JSONParser.parse([UInt8](stored)))).thumbprint)

        let hms = try DeviceToken.hms("lib-hms-1")
        let huawei = try harness.client(device: hms, keyStore: keyStore)
        try await huawei.node(for: "/v2/kw").subscribeThroughNotifications(descriptor: .init(mode: .childEvent))

        try harness.write([
            ("toto", "put", "/v1/value", #"{"text":"one"}"#), ("toto", "put", "/v2/signed", #""two""#),
            ("toto", "put", "/v2/e2e", #"{"secret":3}"#), ("toto", "patch", "/v2/kw", #"{"a":1,"b/c":true}"#),
            ("toto", "put", "/v2/shared", "[4,null,5]"), ("toto", "put", "/v2/wake/deep", "6"),
        ])
        let byPath = try await Self.read(try await harness.fcmData("lib-device-1", count: 6), with: push)
        #expect(byPath["/v1/value"] == [PushNotification(app: "toto", path: "/v1/value", event: .value(["text": "one"]), status: .ok, format: .v1, protection: .none)])
        #expect(byPath["/v2/signed"] == [PushNotification(app: "toto", path: "/v2/signed", event: .value("two"), status: .ok, format: .v2, protection: .signed)])
        #expect(byPath["/v2/e2e"] == [PushNotification(app: "toto", path: "/v2/e2e", event: .value(["secret": 3]), status: .ok, format: .v2, protection: .endToEnd)])
        let childEvent = ChildChanges(added: ["a": 1, "b": ["c": true]], changed: [:], removed: [])
        #expect(byPath["/v2/kw"] == [PushNotification(app: "toto", path: "/v2/kw", event: .childEvent(childEvent), status: .ok, format: .v2, protection: .endToEnd)])
        #expect(byPath["/v2/shared"] == [PushNotification(app: "toto", path: "/v2/shared", event: .value(["0": 4, "2": 5]), status: .ok, format: .v2, protection: .sharedKey)])
        let wake = try #require(byPath["/v2/wake"]?.first)
        #expect(wake.event == .noData && wake.followUp == .readNode && wake.protection == .signed)
        #expect(byPath.values.allSatisfy { $0.allSatisfy { $0.followUp == .none || $0.event == .noData } })

        // HMS delivers `data` as a JSON string: read as such.
        try await ServiceEndToEndTests.eventually("the HMS message") { harness.fakes.received(provider: "hms").contains { $0.status == 200 } }
        let hmsData = try #require(harness.fakes.received(provider: "hms").first { $0.target == "lib-hms-1" }?.data)
        let fromHMS = try await huawei.notification(fromJSON: hmsData)
        #expect(fromHMS.event == .childEvent(childEvent) && fromHMS.protection == .signed)

        // A revocation reaches the device as such, with what to do.
        try harness.revoke(path: "/v2/wake", reason: "disabled")
        let revoked = try await push.notification(from: try await harness.fcmData("lib-device-1", count: 7)[6])
        #expect(revoked.event == .revoked(.disabled) && revoked.path == "/v2/wake" && revoked.followUp == .subscriptionEnded)
    }

    @Test("a value too big for a push reads as TooBig (read the node); children too big as OnlyKeys (read those children)")
    func degradedStatuses() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        let push = try harness.client(device: try .fcm("lib-device-big"))
        try await push.node(for: "/big/value").subscribeThroughNotifications(descriptor: .init(mode: .value, encryption: .endToEnd()))
        try await push.node(for: "/big/children").subscribeThroughNotifications(descriptor: .init(mode: .childEvent))
        let large = "\"" + String(repeating: "x", count: 1500) + "\""
        try harness.write([
            ("toto", "put", "/big/value", #"{"a":\#(large),"b":\#(large),"c":\#(large)}"#),
            ("toto", "put", "/big/children", #"{"k1":\#(large),"k2":\#(large),"k3":\#(large)}"#),
        ])
        let byPath = try await Self.read(try await harness.fcmData("lib-device-big", count: 2), with: push)
        let value = try #require(byPath["/big/value"]?.first)
        #expect(value.event == .value(nil) && value.status == .tooBig && value.followUp == .readNode && value.protection == .endToEnd)
        let children = try #require(byPath["/big/children"]?.first)
        #expect(children.status == .onlyKeys)
        #expect(children.event == .childEvent(ChildChanges(added: ["k1": true, "k2": true, "k3": true], changed: [:], removed: [])))
        #expect(children.followUp == .readChildren(["k1", "k2", "k3"]))
    }

    @Test("APNs and Web Push: an iPad and a browser subscribe through the library; what the fake APNs and the fake push service received reads back as the event written")
    func directProviders() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        let ipad = try DeviceToken.apns(hex: String(repeating: "C3", count: 32))
        let browser = try DeviceToken.webPush(subscriptionJSON: harness.fakes.webPushSubscription("firefox"))
        let apps = try harness.client(device: ipad)
        let web = try harness.client(device: browser)
        let onIPad = try await apps.node(for: "/news").subscribeThroughNotifications(descriptor: .init(mode: .value))
        let inBrowser = try await web.node(for: "/news").subscribeThroughNotifications(descriptor: .init(mode: .value, encryption: .endToEnd()))
        #expect(onIPad.target == .device(ipad) && inBrowser.target == .device(browser))
        // The service lists the browser in the form the library sent: the same device.
        #expect(try await web.subscriptions().contains { $0.target == .device(browser) })
        try harness.write([("toto", "put", "/news", #"{"title":"hello"}"#)])
        try await ServiceEndToEndTests.eventually("the APNs and Web Push deliveries") {
            harness.fakes.received(provider: "apns").contains { $0.status == 200 } && harness.fakes.received(provider: "webpush").contains { $0.status == 201 }
        }
        // APNs: the app gets the body as userInfo; the library drops aps and reads the rest.
        let body = try #require(harness.fakes.received(provider: "apns").first { $0.status == 200 }).data
        let userInfo = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let fromAPNs = try await apps.notification(from: DataMap.from(userInfo: userInfo))
        #expect(fromAPNs.path == "/news" && fromAPNs.status == .ok)
        guard case .value(let value) = fromAPNs.event else {
            Issue.record("APNs: \(fromAPNs.event)")
            return
        }
        #expect(value == ["title": "hello"])
        // Web Push: the browser decrypts the body and hands the data map to the service worker.
        let plaintext = try #require(harness.fakes.received(provider: "webpush").first { $0.status == 201 }).data
        let fromBrowser = try await web.notification(fromJSON: plaintext)
        #expect(fromBrowser.path == "/news" && fromBrowser.status == .ok)
        guard case .value(let encrypted) = fromBrowser.event else {
            Issue.record("Web Push: \(fromBrowser.event)")
            return
        }
        #expect(encrypted == ["title": "hello"])
        // The APNs device cannot read what was encrypted to the browser's device key.
        await #expect(throws: NotificationError.self) { try await apps.notification(fromJSON: plaintext) }
    }
}
