import PushCore
import PushJSON
import Testing

@testable import PushEngine

/// What the builder makes of a notice for each kind of subscription (SPEC §7.4, §8).
@Suite("The notification builder")
struct NotificationBuilderTests {
    @Test("payload bounds: Web Push degrades at 3,994 bytes (one 4,096-byte aes128gcm record), APNs as FCM at 4,064")
    func payloadBounds() throws {
        #expect(PayloadLimit.webPushBytes == 3_994 && PayloadLimit.bytes == 4_064)
        struct NoSealers: SealerProvider {
            func sealer(for subscription: Subscription) throws -> any EventSealer { throw RequestError(.invalid, "v1 only here") }
        }
        var builder = NotificationBuilder(sealers: NoSealers())
        // A value whose v1 payload is just under FCM's bound and over Web Push's.
        let value = JSON.string(String(repeating: "x", count: 3_960))
        for kind in [SubscriptionKind.fcm, .apns, .webpush] {
            let tuple = SubscriptionTuple(app: "toto", uid: "u1", kind: kind, destination: nil, path: try Path("/p"), context: "c")
            let subscription = Subscription(id: "s", tuple: tuple, mode: .value, format: .v1, encryption: nil, createdAt: 0, expiresAt: 1)
            let built = try builder.payload(Notice(subscription: subscription, event: Event(app: "toto", path: "/p", body: .value(value))))
            if kind == .webpush {
                #expect(built.status == .tooBig && built.bytes.count < 3_994)
            } else {
                #expect(built.status == .ok && (3_994..<4_064).contains(built.bytes.count), "\(kind): \(built.bytes.count)")
            }
        }
    }
}
