import PushCore
import PushContracts
import PushHTTP
import PushJOSE

/// A webhook (SPEC §8): the §8 body, signed per Standard Webhooks.
public struct WebhookSender: NotificationSender {
    public let provider = Provider.webhook
    let url: String
    let secret: WebhookSecret
    let context: SenderContext

    public init(url: String, secret: WebhookSecret, context: SenderContext) {
        self.url = url
        self.secret = secret
        self.context = context
    }

    /// The message id: the same for every attempt at the same content (a row keeps its id
    /// while it waits; a newer value merged into it changes its record).
    public static func messageID(_ notification: StoredNotification) -> String {
        "msg_\(notification.id)_\(notification.entry.recordSeq ?? 0)"
    }

    public func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome {
        let id = Self.messageID(notification)
        let body = ProviderMessages.webhook(id: id, storedBody: notification.entry.payload)
        let timestamp = now / 1_000
        var headers = [
            ("content-type", "application/json"), ("webhook-id", id), ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", secret.signature(id: id, timestamp: timestamp, body: body)),
        ]
        // Traced: the attempt's W3C trace context, so the receiver's spans join the trace.
        if let traceparent = notification.traceparent { headers.append(("traceparent", traceparent)) }
        do {
            let answer = try await context.send(OutgoingRequest(url: url, headers: headers, body: body), provider: provider)
            return AnswerClassifier.webhook(answer, now: context.clock.now)
        } catch {
            return .unanswered(error)
        }
    }
}
