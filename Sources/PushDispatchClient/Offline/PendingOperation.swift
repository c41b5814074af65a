import PushCore
import PushJSON

/// One subscription operation waiting in the offline queue: what to ask of the service, for
/// which user, and whether it may already have reached the service.
///
/// Everything a request needs is decided when the operation is queued (the device token, the
/// encryption block with the device's public key, the expiration): sending it later asks
/// nothing of the app but its credentials.
struct PendingOperation: Sendable, Equatable {
    /// The queue's own id for it (not a subscription id): 16 lowercase hexadecimal digits.
    var id: String
    /// The user it is sent for: known when it was queued (from an earlier request of this
    /// process) or fixed at its first attempt; `nil` until then.
    var uid: String?
    var action: Action
    /// How many times it was handed to the network. More than zero: the service may have
    /// applied it (an answer can be lost), so it is never withdrawn silently.
    var attempts: Int
    /// Set when operations were merged into it (withdrawn by it, or replaced by it): it stands
    /// for them too, and cannot be withdrawn.
    var absorbed = false

    /// What the operation asks of the service.
    enum Action: Sendable, Equatable {
        /// `POST` of the subscription document (SPEC §5); `options` are its mode, format,
        /// encryption and expiration members.
        case subscribe(target: Target, path: String, options: JSONObject, allowsUpdate: Bool)
        /// `POST` of the tuple with `expirationTimestampSeconds: 0`.
        case unsubscribe(target: Target, path: String)
        /// `PUT` of one subscription, by id: its expiration pushed to `until` (Unix seconds),
        /// or by the application's default lifetime.
        case refresh(id: String, path: String, until: Int64?)
        /// `DELETE` of one subscription, by id.
        case cancel(id: String, path: String)
        /// Every subscription of a device token removed.
        case unsubscribeAll(device: DeviceToken)
        /// Every subscription of the tokens `from` made again with `to`, then removed. Several
        /// tokens when updates merged (A → B, then B → C: A and B → C).
        case updateDeviceToken(from: [DeviceToken], to: DeviceToken)
    }

    /// Who a subscription is for.
    enum Target: Sendable, Hashable {
        case device(DeviceToken)
        case webhook(name: String, context: String)
    }

    /// What operations on "the same thing" share: a subscription tuple (target and path), or
    /// a subscription id. Merging (see ``OperationMerging``) looks only at the same key.
    enum MergeKey: Hashable {
        case tuple(Target, String)
        case id(String)
    }

    var mergeKey: MergeKey? {
        switch action {
        case .subscribe(let target, let path, _, _), .unsubscribe(let target, let path): return .tuple(target, path)
        case .refresh(let id, _, _), .cancel(let id, _): return .id(id)
        case .unsubscribeAll, .updateDeviceToken: return nil
        }
    }

    /// The public name of what it does.
    var kind: QueuedOperation.Kind {
        switch action {
        case .subscribe: return .subscribe
        case .unsubscribe: return .unsubscribe
        case .refresh: return .refresh
        case .cancel: return .cancel
        case .unsubscribeAll: return .unsubscribeAll
        case .updateDeviceToken: return .updateDeviceToken
        }
    }

    /// The node it is about, if it is about one.
    var path: String? {
        switch action {
        case .subscribe(_, let path, _, _), .unsubscribe(_, let path), .refresh(_, let path, _), .cancel(_, let path): return path
        case .unsubscribeAll, .updateDeviceToken: return nil
        }
    }
}

extension PendingOperation.Target {
    /// The document members that name this tuple on `path` (SPEC §5).
    func document(path: String) -> [(Key, JSON)] {
        switch self {
        case .device(let token):
            return SubscriptionDocument.device(token, path: path)
        case .webhook(let name, let context):
            return [
                (Key("kind"), .string("webhook")), (Key("path"), .string(path)), (Key("destination"), .string(name)),
                (Key("context"), .string(context)),
            ]
        }
    }
}
