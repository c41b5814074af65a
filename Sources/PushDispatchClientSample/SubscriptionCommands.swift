import ArgumentParser
import Foundation
import PushCore
import PushJSON
import PushDispatchClient

/// `subscribe`: subscribes this device (or a webhook) to a node, and prints the subscription.
struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "subscribe", abstract: "Subscribe this device (or a webhook) to a node.")

    @OptionGroup var options: ClientOptions

    @Option(help: "The node's path.")
    var path: String

    @Option(help: "value, noData or childEvent.")
    var mode = "noData"

    @Option(help: "v2 (signed) or v1.")
    var format = "v2"

    @Flag(help: "Encrypt v2 payloads end to end, to this device's own key (ECDH-ES, A256GCM).")
    var encrypt = false

    @Option(help: "Encrypt v2 payloads with the application's shared key of this kid (dir, A256GCM) instead.")
    var sharedKey: String?

    @Option(help: "Subscribe the application's webhook of this name instead of the device.")
    var webhook: String?

    @Option(help: "The webhook's context.")
    var context = ""

    @OptionGroup var queued: OfflineOptions

    func run() async throws {
        guard let mode = Mode(rawValue: mode) else { throw ValidationError("--mode: value, noData or childEvent") }
        guard let format = PayloadFormat(rawValue: format) else { throw ValidationError("--format: v1 or v2") }
        var descriptor = SubscriptionDescriptor(mode: mode, format: format)
        if encrypt { descriptor.encryption = .endToEnd() }
        if let sharedKey { descriptor.encryption = .sharedKey(kid: sharedKey) }
        let node = try options.service().node(for: path)
        if queued.offline {
            let operation =
                if let webhook {
                    try await node.offline.subscribeThroughWebhook(webhook, context: context, descriptor: descriptor)
                } else {
                    try await node.offline.subscribeThroughNotifications(descriptor: descriptor)
                }
            try await queued.report(operation)
            return withExtendedLifetime(node) {}
        }
        let subscription =
            if let webhook {
                try await node.subscribeThroughWebhook(webhook, context: context, descriptor: descriptor)
            } else {
                try await node.subscribeThroughNotifications(descriptor: descriptor)
            }
        print(subscription)
    }
}

/// `unsubscribe`: removes this device's subscription to a node.
struct UnsubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unsubscribe", abstract: "Remove this device's subscription to a node.")

    @OptionGroup var options: ClientOptions

    @Option(help: "The node's path.")
    var path: String

    @OptionGroup var queued: OfflineOptions

    func run() async throws {
        if queued.offline {
            let node = try options.service().node(for: path)
            try await queued.report(try await node.offline.unsubscribeThroughNotifications())
            // (The queue lives as long as its service object: kept until the report is done.)
            return withExtendedLifetime(node) {}
        }
        try await options.service().node(for: path).unsubscribeThroughNotifications()
        print("unsubscribed from \(path)")
    }
}

/// `list`: prints the user's subscriptions in the application.
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the user's subscriptions.")

    @OptionGroup var options: ClientOptions

    func run() async throws {
        for subscription in try await options.service().subscriptions() { print(subscription) }
    }
}

/// `unsubscribe-all`: removes every subscription of this device.
struct UnsubscribeAllCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unsubscribe-all", abstract: "Remove every subscription of this device.")

    @OptionGroup var options: ClientOptions

    @OptionGroup var queued: OfflineOptions

    func run() async throws {
        if queued.offline {
            let push = try options.service()
            try await queued.report(try await push.offline.unsubscribeFromAllThroughNotifications())
            return withExtendedLifetime(push) {}
        }
        let removed = try await options.service().unsubscribeFromAllThroughNotifications()
        print("removed \(removed) subscriptions")
    }
}

/// `update-token`: moves this device's subscriptions to its new push token.
struct UpdateTokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update-token", abstract: "Move every subscription of --device to the new token.")

    @OptionGroup var options: ClientOptions

    @Option(help: "The new token: fcm:TOKEN, hms:TOKEN, apns:HEX or webpush:JSON.")
    var newDevice: String

    @OptionGroup var queued: OfflineOptions

    func run() async throws {
        if queued.offline {
            let push = try options.service()
            try await queued.report(try await push.offline.updateDeviceTokenInAllSubscriptions(try ClientOptions.deviceToken(newDevice)))
            return withExtendedLifetime(push) {}
        }
        let moved = try await options.service().updateDeviceTokenInAllSubscriptions(try ClientOptions.deviceToken(newDevice))
        for subscription in moved { print(subscription) }
    }
}
