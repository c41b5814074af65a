import PushJSON

/// How a new operation joins the queue: operations that cancel or repeat each other are merged,
/// so that fewer requests are sent, and what the service ends up holding is what sending every
/// operation in order would leave. Pure: the queue's actor applies the result.
///
/// The rules, for operations of the same user; the operation on the network is never touched:
/// - subscribe, then subscribe of the same tuple (target and node) that may update it
///   (`allowsUpdate`): the later replaces the earlier, whose handle follows the later. A later
///   one that may not update would get 409 after the earlier, and one whose fixed expiration is
///   sooner than the earlier's could be refused (passed) where the earlier would not: then both
///   are kept;
/// - subscribe never sent, then unsubscribe of the same tuple: the subscribe is withdrawn
///   (`cancelled`) and the unsubscribe kept. It is still sent, because the service may hold a
///   subscription of that tuple from before, which the app asked to remove. A subscribe that
///   may have reached the service is kept: the unsubscribe after it removes what it made;
/// - unsubscribe, then unsubscribe; cancel, then cancel (same subscription id): one, the
///   later; refresh, then refresh: the later, when its expiration is no sooner;
/// - refresh never sent, then cancel of the same subscription: the refresh is withdrawn;
/// - unsubscribe-all of a device: its subscribes never sent are withdrawn, its unsubscribes
///   and an earlier unsubscribe-all of it are merged into it, back to a token update naming it;
/// - token update A → B after an update X → A never sent: one update, X and A → B ("two
///   updates send the last"), queued last, when only operations of other devices and of
///   webhooks are between the two. A subscription both X and A hold ends as X's, as in order.
///
/// An operation that took others in is marked `absorbed`: withdrawing it would withdraw them.
enum OperationMerging {
    /// What joining the queue did.
    struct Outcome: Equatable {
        /// The queue after the operation joined it.
        var queue: [PendingOperation]
        /// Operations taken out because a later one made them pointless: they end `cancelled`.
        var withdrawn: [String] = []
        /// Operations taken out because another does what they asked (`from` → `to`): they end
        /// as that one does.
        var forwarded: [Forward] = []

        struct Forward: Equatable {
            var from: String
            var to: String
        }
    }

    /// Most tokens one merged token update moves from.
    static let maxTokensPerUpdate = 16

    /// `new` joined to `queue`; `sending` is the id of the operation on the network.
    static func enqueue(_ new: PendingOperation, into queue: [PendingOperation], sending: String?) -> Outcome {
        var outcome = Outcome(queue: queue)
        var operation = new
        func movable(_ other: PendingOperation) -> Bool {
            other.id != sending && sameUser(other, operation)
        }
        // An operation that takes the place of one that may have reached the service may have
        // reached it too: it carries the attempts over, so that it is never withdrawn silently.
        func forward(_ earlier: PendingOperation) {
            outcome.forwarded.append(.init(from: earlier.id, to: operation.id))
            operation.attempts = max(operation.attempts, earlier.attempts)
            operation.absorbed = true
        }
        func withdraw(_ earlier: PendingOperation) {
            outcome.withdrawn.append(earlier.id)
            operation.absorbed = true
        }
        switch operation.action {
        case .subscribe, .unsubscribe, .refresh, .cancel:
            guard let key = operation.mergeKey else { break }
            merging: while let index = lastTouching(key, in: outcome.queue, user: operation), movable(outcome.queue[index]) {
                let earlier = outcome.queue[index]
                switch (operation.action, earlier.action) {
                case (.subscribe(_, _, let options, true), .subscribe(_, _, let earlierOptions, _)):
                    // A later expiration fixed before the earlier one's could be refused (past) when
                    // the earlier would not: then both are sent.
                    guard expiresNoSooner(options[Key("expirationTimestampSeconds")]?.integerValue, than: earlierOptions[Key("expirationTimestampSeconds")]?.integerValue)
                    else { break merging }
                    forward(earlier)
                case (.refresh(_, _, let until), .refresh(_, _, let earlierUntil)):
                    guard expiresNoSooner(until, than: earlierUntil) else { break merging }
                    forward(earlier)
                case (.unsubscribe, .unsubscribe), (.cancel, .cancel):
                    forward(earlier)
                case (.unsubscribe, .subscribe), (.cancel, .refresh):
                    guard earlier.attempts == 0 else { break merging }
                    withdraw(earlier)
                default:
                    break merging
                }
                outcome.queue.remove(at: index)
            }

        case .unsubscribeAll(let device):
            // Not across a token update naming the device: what it moved would end otherwise.
            let barrier = outcome.queue.lastIndex { earlier in
                if case .updateDeviceToken(let from, let to) = earlier.action { return from.contains(device) || to == device }
                return false
            }
            let start = barrier.map { $0 + 1 } ?? 0
            let kept = outcome.queue[..<start]
            outcome.queue = Array(kept) + outcome.queue[start...].filter { earlier in
                guard movable(earlier) else { return true }
                switch earlier.action {
                case .subscribe(.device(device), _, _, _) where earlier.attempts == 0:
                    withdraw(earlier)
                    return false
                case .unsubscribe(.device(device), _), .unsubscribeAll(device):
                    forward(earlier)
                    return false
                default:
                    return true
                }
            }

        case .updateDeviceToken(let from, let to):
            if let index = outcome.queue.lastIndex(where: { earlier in
                if case .updateDeviceToken(_, let earlierTo) = earlier.action { return from.contains(earlierTo) }
                return false
            }),
                case .updateDeviceToken(let earlierFrom, let middle) = outcome.queue[index].action,
                movable(outcome.queue[index]), outcome.queue[index].attempts == 0,
                outcome.queue[(index + 1)...].allSatisfy({ mergeable(across: $0, moving: Set(earlierFrom + from), middle: middle, to: to) })
            {
                var tokens: [DeviceToken] = []
                for token in earlierFrom + from where token != to && !tokens.contains(token) { tokens.append(token) }
                if !tokens.isEmpty && tokens.count <= maxTokensPerUpdate {
                    forward(outcome.queue[index])
                    outcome.queue.remove(at: index)
                    operation.action = .updateDeviceToken(from: tokens, to: to)
                }
            }
        }
        outcome.queue.append(operation)
        return outcome
    }

    /// Whether `between`, queued between two token updates merged into one sent after it,
    /// ends the same: an operation of another device, or of a webhook. Anything else keeps the
    /// updates apart: an operation of a token moved, of the middle one or of the new one (the
    /// merged move, coming after it, would overwrite or undo it), a compound operation, an
    /// operation by subscription id (whose device is not known here).
    static func mergeable(across between: PendingOperation, moving tokens: Set<DeviceToken>, middle: DeviceToken, to: DeviceToken) -> Bool {
        switch between.action {
        case .subscribe(.device(let token), _, _, _), .unsubscribe(.device(let token), _):
            return token != middle && token != to && !tokens.contains(token)
        case .subscribe(.webhook, _, _, _), .unsubscribe(.webhook, _): return true
        case .refresh, .cancel, .unsubscribeAll, .updateDeviceToken: return false
        }
    }

    /// The index of the last operation that acts on `key`, or of a compound operation after
    /// which merging with anything earlier would change what is sent (an unsubscribe-all or a
    /// token update naming the tuple's device; any of them for a subscription id, whose
    /// device is not known here).
    static func lastTouching(_ key: PendingOperation.MergeKey, in queue: [PendingOperation], user: PendingOperation) -> Int? {
        for index in queue.indices.reversed() {
            let earlier = queue[index]
            guard sameUser(earlier, user) else { continue }
            if earlier.mergeKey == key { return index }
            switch (key, earlier.action) {
            case (.tuple(.device(let device), _), .unsubscribeAll(let other)) where other == device: return index
            case (.tuple(.device(let device), _), .updateDeviceToken(let from, let to)) where from.contains(device) || to == device: return index
            case (.id, .unsubscribeAll), (.id, .updateDeviceToken): return index
            default: continue
            }
        }
        return nil
    }

    /// Whether two operations are for the same user: the same uid, or one not known yet (queued
    /// before this process made any request). They could end up for two users only if the user
    /// changed between them without ``OfflineQueue/discardAll()``, which sign-out calls.
    static func sameUser(_ a: PendingOperation, _ b: PendingOperation) -> Bool {
        a.uid == nil || b.uid == nil || a.uid == b.uid
    }

    /// Whether an expiration fixed at `later` (Unix seconds; `nil`: the application's default
    /// lifetime, from when it is sent) is refused no sooner than one fixed at `earlier`.
    static func expiresNoSooner(_ later: Int64?, than earlier: Int64?) -> Bool {
        guard let later else { return true }
        guard let earlier else { return false }
        return later >= earlier
    }
}
