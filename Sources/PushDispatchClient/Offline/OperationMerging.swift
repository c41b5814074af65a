/// How a new operation joins the queue: operations that cancel or repeat each other are merged,
/// so that what is finally sent is what the app last asked for, with no request it made
/// pointless. Pure: the queue's actor applies the result.
///
/// The rules, for operations on the same subscription tuple (target and node) or the same
/// subscription id, of the same user; an operation being sent is never touched:
/// - subscribe, then subscribe: the later replaces the earlier (its handle follows the later);
/// - subscribe, then unsubscribe: the subscribe is withdrawn (`cancelled`) and the unsubscribe
///   is kept. It is still sent, because the service may hold a subscription to that node from
///   before, which the app asked to remove; an unsubscribe, then another, are one;
/// - refresh, then refresh: the later replaces the earlier; refresh, then cancel: the refresh
///   is withdrawn; cancel, then cancel: one;
/// - unsubscribe-all of a device: every waiting subscribe of that device is withdrawn and
///   every waiting unsubscribe of it merged into it;
/// - token update A → B: the waiting operations of A that were never sent are moved to B (so
///   that the update need not move them), and a waiting update X → A that was never sent
///   becomes X → B: two updates send the last. When some operation of A may already have
///   reached the service, nothing is moved and the update is queued as it is.
///
/// Withdrawing (``QueuedOperation/cancel()``) takes out an operation that was never handed to
/// the network; one that was may have been applied, and is left to finish.
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

    /// `operation` joined to `queue`; `sending` is the id of the operation on the network.
    static func enqueue(_ new: PendingOperation, into queue: [PendingOperation], sending: String?) -> Outcome {
        var outcome = Outcome(queue: queue)
        // An operation that takes the place of one that may have reached the service may have
        // reached it too: it carries the attempts over, so that it is never withdrawn silently.
        var operation = new
        func movable(_ other: PendingOperation) -> Bool {
            other.id != sending && sameUser(other, operation)
        }
        switch operation.action {
        case .subscribe, .unsubscribe, .refresh, .cancel:
            guard let key = operation.mergeKey else { break }
            while let index = lastTouching(key, in: outcome.queue, user: operation), movable(outcome.queue[index]) {
                let earlier = outcome.queue[index]
                switch (operation.action, earlier.action) {
                case (.subscribe, .subscribe), (.unsubscribe, .unsubscribe), (.refresh, .refresh), (.cancel, .cancel):
                    outcome.forwarded.append(.init(from: earlier.id, to: operation.id))
                    operation.attempts = max(operation.attempts, earlier.attempts)
                case (.unsubscribe, .subscribe), (.cancel, .refresh):
                    outcome.withdrawn.append(earlier.id)
                default:
                    outcome.queue.append(operation)
                    return outcome
                }
                outcome.queue.remove(at: index)
            }
            outcome.queue.append(operation)

        case .unsubscribeAll(let device):
            outcome.queue = outcome.queue.filter { earlier in
                guard movable(earlier) else { return true }
                switch earlier.action {
                case .subscribe(.device(device), _, _, _):
                    outcome.withdrawn.append(earlier.id)
                    return false
                case .unsubscribe(.device(device), _), .unsubscribeAll(device):
                    outcome.forwarded.append(.init(from: earlier.id, to: operation.id))
                    operation.attempts = max(operation.attempts, earlier.attempts)
                    return false
                default:
                    return true
                }
            }
            outcome.queue.append(operation)

        case .updateDeviceToken(let old, let new):
            // Moved only when every waiting operation of the old token was never sent, and the
            // only compound operations that name it are updates to it, never sent: else the
            // service may already hold what they did, and the update moves it.
            var earlierUpdate: Int?
            for (index, earlier) in outcome.queue.enumerated() {
                let namesOld: Bool
                switch earlier.action {
                case .updateDeviceToken(let from, let to):
                    if to == old && from != old && movable(earlier) && earlier.attempts == 0 {
                        earlierUpdate = index
                        continue
                    }
                    namesOld = from == old || to == old
                case .unsubscribeAll(let device): namesOld = device == old
                default: namesOld = earlier.device == old
                }
                if namesOld && (!movable(earlier) || earlier.attempts > 0 || earlier.kind == .unsubscribeAll) {
                    outcome.queue.append(operation)
                    return outcome
                }
            }
            for index in outcome.queue.indices {
                switch outcome.queue[index].action {
                case .subscribe(.device(old), let path, let options, let allowsUpdate):
                    outcome.queue[index].action = .subscribe(target: .device(new), path: path, options: options, allowsUpdate: allowsUpdate)
                case .unsubscribe(.device(old), let path):
                    outcome.queue[index].action = .unsubscribe(target: .device(new), path: path)
                default:
                    break
                }
            }
            if let earlierUpdate, case .updateDeviceToken(let from, _) = outcome.queue[earlierUpdate].action {
                outcome.queue[earlierUpdate].action = .updateDeviceToken(from: from, to: new)
                outcome.forwarded.append(.init(from: operation.id, to: outcome.queue[earlierUpdate].id))
            } else {
                outcome.queue.append(operation)
            }
        }
        return outcome
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
            case (.tuple(.device(let device), _), .updateDeviceToken(let from, let to)) where from == device || to == device: return index
            case (.id, .unsubscribeAll), (.id, .updateDeviceToken): return index
            default: continue
            }
        }
        return nil
    }

    /// Whether two operations are for the same user: the same uid, or one not known yet.
    static func sameUser(_ a: PendingOperation, _ b: PendingOperation) -> Bool {
        a.uid == nil || b.uid == nil || a.uid == b.uid
    }
}
