import Foundation
import PushDispatchClient

let push = try PushDispatch(.init(
    baseURL: URL(string: "https://push.example.com")!,          // https://, or http:// on loopback
    app: "toto",
    credentials: { forceRefresh in                               // the signed-in user, from your back end
        Credentials(uid: session.uid, token: try await session.idToken(forceRefresh: forceRefresh))
    },
    deviceToken: try .fcm(fcmToken),                             // or .hms(…), .apns(deviceToken), .webPush(subscriptionJSON:)
    offlineQueue: .persistent()))                                // requests made offline wait on disk (see below)

// Subscribe: the value of the room, encrypted to this device's own key (made and kept by the library).
let room = try push.node(for: "/rooms/lobby")
let subscription = try await room.subscribeThroughNotifications(
    descriptor: .init(mode: .value, encryption: .endToEnd()))
print(subscription.id, subscription.expiresAt)

// FCM issued a new token (messaging(_:didReceiveRegistrationToken:)): every subscription of
// the old one is made again with the new one.
func registrationTokenChanged(_ token: String) {
    Task { try await push.updateDeviceTokenInAllSubscriptions(try .fcm(token)) }
}

// A notification arrived (application(_:didReceiveRemoteNotification:) gives its userInfo).
let notification = try await push.notification(from: DataMap.from(userInfo: userInfo))
switch notification.event {
case .value(let value):        show(try value?.decode(Room.self))   // nil: deleted (or TooBig, see followUp)
case .childEvent(let changes): apply(changes.added, changes.changed, changes.removed)
case .noData:                  break
case .revoked(let reason):     forget(notification.path, because: reason)
}
switch notification.followUp {
case .none: break
case .readNode: reload(notification.path)                 // noData, or the value too big for a push
case .readChildren(let keys): reload(notification.path, children: keys)   // OnlyKeys
case .subscribeAgain:                                      // expired: the service removed it
    try await room.subscribeThroughNotifications(descriptor: .init(mode: .value, encryption: .endToEnd()))
case .subscriptionEnded: break                            // revoked for good
}

// Later.
try await subscription.refresh(until: Date().addingTimeInterval(7 * 86_400))
try await room.unsubscribeThroughNotifications()

// Offline: accepted at once whatever the network, sent when the service can be reached.
let queued = try await room.offline.subscribeThroughNotifications(descriptor: .init(mode: .value))
Task {
    for await update in await push.offline.updates() {        // pending → confirmed, refused or cancelled
        print(update.operation, update.state)
    }
}
if case .refused(let error) = await queued.outcome() { print("refused:", error.code) }
await push.offline.networkAvailable()                     // from your NWPathMonitor handler: retry now
try await push.unsubscribeFromAllThroughNotifications()   // sign-out
try await push.offline.discardAll()                       //   and nothing left queued for this user
