import Testing
@testable import PushCore
import PushContracts

/// ``Subscription`` and ``OutboxEntry`` share their fields between copies: still values.
@Suite("Values sharing their fields")
struct SharedFieldsTests {
    @Test("a changed copy leaves the original as it was; equality is by fields, not by box")
    func valueSemantics() {
        let original = Subscription(
            id: "s7", tuple: SubscriptionTuple(app: "toto", uid: "u1", kind: .fcm, destination: nil, path: try! Path("/a/b"), context: "token-7"),
            mode: .value, format: .v1, encryption: nil, createdAt: 0, expiresAt: 1, handle: 7)
        var changed = original
        #expect(changed == original)
        changed.expiresAt = original.expiresAt + 60
        changed.auth = ["sub": "u1"]
        #expect(original.auth == nil && changed.auth == ["sub": "u1"])
        #expect(original.expiresAt + 60 == changed.expiresAt)
        #expect(changed != original)
        changed.expiresAt = original.expiresAt
        changed.auth = nil
        #expect(changed == original, "equal fields in another box")

        let entry = OutboxEntry(
            app: "toto", subscriptionHandle: 7, subscriptionID: "id", kind: .fcm, target: "t", destination: nil, notification: .value,
            payload: Array("{}".utf8), recordSeq: 1)
        var other = entry
        other.payload = Array("{\"x\":1}".utf8)
        #expect(entry.payload == Array("{}".utf8) && other != entry)
    }
}
