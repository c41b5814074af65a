import Foundation
import PushDispatchClient
import Testing

/// Device tokens are checked before anything is sent, and written as the service expects them.
@Suite("Device tokens")
struct DeviceTokenTests {
    @Test("each provider's token becomes its kind and context")
    func kinds() throws {
        #expect(try DeviceToken.fcm("dGVzdA:APA91b-x_y").kind.subscriptionKind == "mobile")
        #expect(try DeviceToken.hms("0864-abc").kind.subscriptionKind == "huawei")
        let apns = try DeviceToken.apns(Data([0x00, 0x0F, 0xA0, 0xFF, 0x01, 0x02, 0x03, 0x04]))
        #expect(apns.kind.subscriptionKind == "apns" && apns.value == "000fa0ff01020304")
        #expect(try DeviceToken.apns(hex: "000FA0FF01020304") == apns)
        let web = try DeviceToken.webPush(subscriptionJSON: """
            { "keys": { "p256dh": "BNc", "auth": "tBH" },
              "expirationTime": null, "endpoint": "https://push.example.net/p/1" }
            """)
        #expect(web.kind.subscriptionKind == "webpush")
        // The service's canonical form: the same subscription always names the same device.
        #expect(web.value == #"{"endpoint":"https://push.example.net/p/1","keys":{"auth":"tBH","p256dh":"BNc"}}"#)
    }

    @Test(
        "a token of the wrong shape is refused, without being echoed whole",
        arguments: [
            "fcm:", "fcm:has space", "fcm:tab\there", "hms:" + String(repeating: "x", count: 4097), "apns:abc", "apns:zz", "apns:", "apns:000fa0ff",
            #"webpush:{"endpoint":"http://insecure.example","keys":{"p256dh":"a","auth":"b"}}"#, #"webpush:{"endpoint":"https://x.example/1"}"#,
            #"webpush:{"endpoint":"https://x.example/1","keys":{"p256dh":"","auth":"b"}}"#, "webpush:not json", "webpush:[1]",
        ])
    func refused(_ text: String) {
        let colon = text.firstIndex(of: ":")!
        let value = String(text[text.index(after: colon)...])
        #expect {
            switch text[..<colon] {
            case "fcm": _ = try DeviceToken.fcm(value)
            case "hms": _ = try DeviceToken.hms(value)
            case "apns": _ = try DeviceToken.apns(hex: value)
            default: _ = try DeviceToken.webPush(subscriptionJSON: value)
            }
        } throws: { error in
            guard let error = error as? PushClientError else { return false }
            return error.code == .invalidArgument && error.message.utf8.count < 400
        }
    }

    @Test("a description shows the kind and a prefix, never the whole token")
    func description() throws {
        let token = try DeviceToken.fcm("abcdefghijklmnopqrstuvwxyz0123456789")
        #expect(token.description == "mobile device abcdefghijkl…")
    }
}
