import Foundation
import PushDispatchClient

// What the README's example takes from the app around it: the signed-in user's session, the
// push token and the notification the system handed over, the app's own model and views. Here
// stand-ins, so that the example compiles as the README shows it (`ReadmeExampleTests`).

final class UserSession: Sendable {
    let uid = "alice"

    func idToken(forceRefresh: Bool) async throws -> String {
        "a JWT from your back end"
    }
}

let session = UserSession()
let fcmToken = "the FCM registration token"
@MainActor let userInfo: [AnyHashable: Any] = [:]

struct Room: Decodable {
    var topic: String
}

func show(_ room: Room?) {}
func apply(_ added: [String: JSON], _ changed: [String: JSON], _ removed: [String]) {}
func forget(_ path: String, because reason: RevocationReason) {}
func reload(_ path: String, children: [String] = []) {}
