import Foundation
import PushCore
import PushJSON

/// A webhook request of the service, verified: the notification and what the envelope says
/// about it (SPEC §8).
public struct WebhookNotification: Sendable, Equatable {
    /// The message id (`webhook-id`, the body's `id`): the same for every attempt at the same
    /// message, so repeats can be dropped.
    public let messageID: String
    /// When the service signed this attempt (`webhook-timestamp`).
    public let sentAt: Date
    /// The user whose subscription it is.
    public let uid: String
    /// The subscription's id.
    public let subscriptionID: String
    /// The `context` the subscription was made with; `nil` when it had none.
    public let context: String?
    /// The notification.
    public let notification: PushNotification
}

/// Reads the §8 body: `{"id","app","uid","subscription","path","context","event"}`.
enum WebhookBody {
    static func read(_ body: [UInt8], id: String, sentAt: Int64, app: String) throws(NotificationError) -> WebhookNotification {
        let json: JSON
        do {
            json = try JSONParser.parseRejectingDuplicateKeys(body)
        } catch {
            throw .malformed("the webhook body is not JSON: \(error)")
        }
        guard case .object(let object) = json else { throw .malformed("the webhook body is \(json.typeName), not an object") }
        func string(_ name: String) throws(NotificationError) -> String {
            guard case .string(let text)? = object[Key(name)] else { throw .malformed("the webhook body has no string \(name)") }
            return text
        }
        guard utf8Equal(try string("id"), id) else { throw .malformed("the body's id differs from webhook-id") }
        let bodyApp = try string("app")
        guard utf8Equal(bodyApp, app) else {
            throw NotificationError(.otherApplication, "the webhook request is for application \(Bounded.quoted(bodyApp)), not \(Bounded.quoted(app))")
        }
        var context: String?
        switch object[Key("context")] {
        case nil, .null?: context = nil
        case .string(let text)?: context = text
        case let other?: throw .malformed("the webhook body's context is \(other.typeName), not a string")
        }
        guard let eventJSON = object[Key("event")] else { throw .malformed("the webhook body has no event") }
        let event = try EventReader.read(eventJSON)
        guard utf8Equal(event.app, bodyApp), utf8Equal(event.path, try string("path")) else {
            throw .malformed("the event's application or path differs from the body's")
        }
        return WebhookNotification(
            messageID: id, sentAt: Date(timeIntervalSince1970: TimeInterval(sentAt)), uid: try string("uid"),
            subscriptionID: try string("subscription"), context: context,
            notification: PushNotification(
                app: event.app, path: event.path, event: event.event, status: event.status, format: .v2, protection: .webhookSignature))
    }
}
