import PushCore
import PushJSON

/// Sends one queued operation to the service, and says what its failure means for the queue.
struct OperationExecutor: Sendable {
    let client: SubscriptionClient

    /// What the queue does after a failure.
    enum Disposition: Equatable {
        /// Try again later (back-off with jitter): no answer, the service could not answer, or
        /// the credentials provider failed (it may need the network to renew a token).
        case retry
        /// Stop sending until the credentials change: the service refused the token even
        /// after a fresh one was asked for.
        case suspend
        /// This operation alone is refused for good; the others go on.
        case refuse
    }

    /// The disposition of `error`. Answers that a later attempt may change are retried; the
    /// token's refusal suspends the queue; every other answer is the service's word on this
    /// operation.
    static func disposition(of error: PushClientError) -> Disposition {
        // Any 5xx or 408 (the service's own `request_timeout` too: a stalled link), and a
        // proxy's 429 without the service's error body: a wait, not a refusal.
        if let status = error.status, status >= 500 || status == 408 || (status == 429 && error.bare) { return .retry }
        switch error.code {
        case .transport, .unavailable, .internalError, .invalidResponse, .credentials: return .retry
        case .unauthorized: return .suspend
        default: return .refuse
        }
    }

    /// Whether the service may have applied what failed with `error`: not when no connection
    /// was made, when nothing was sent (the credentials provider failed, another user), or when
    /// the service refused the token.
    static func mayHaveApplied(_ error: PushClientError) -> Bool {
        !(error.neverSent || error.code == .credentials || error.code == .userChanged || error.code == .unauthorized)
    }

    /// The uid of the credentials the provider gave last in this process, if any.
    func currentUID() -> String? {
        client.rest.lastUID.get()
    }

    /// Sends `operation`; the subscription the service answered (subscribe, refresh), `nil`
    /// for the others, or the error that stopped it.
    /// What an attempt came to, and whether some request of it was answered (a compound
    /// operation that got answers reached the service, whatever stopped it after).
    struct Attempt {
        var result: Result<NodeSubscription?, PushClientError>
        var answered: Bool

        /// Whether the service may have applied some of it.
        var mayHaveApplied: Bool {
            guard case .failure(let error) = result else { return true }
            return answered || OperationExecutor.mayHaveApplied(error)
        }
    }

    func execute(_ operation: PendingOperation) async -> Attempt {
        let progress = Progress()
        do {
            let subscription = try await send(operation, progress)
            return Attempt(result: .success(subscription), answered: true)
        } catch {
            return Attempt(result: .failure(error), answered: progress.answered)
        }
    }

    /// Whether some request of the operation was answered.
    final class Progress: @unchecked Sendable {
        var answered = false
    }

    private func send(_ operation: PendingOperation, _ progress: Progress) async throws(PushClientError) -> NodeSubscription? {
        let uid = operation.uid
        switch operation.action {
        case .subscribe(let target, let path, let options, let allowsUpdate):
            var members = target.document(path: path)
            for (key, value) in options { members.append((key, value)) }
            return try await client.create(.object(JSONObject(members)), allowsUpdate: allowsUpdate, as: uid)

        case .unsubscribe(let target, let path):
            try await client.remove(.object(JSONObject(target.document(path: path))), as: uid)
            return nil

        case .refresh(let id, _, let until):
            return try await client.refresh(id: id, until: until, as: uid)

        case .cancel(let id, _):
            do {
                try await client.delete(id: id, as: uid)
            } catch let error where error.code == .notFound {
                // Gone already (expired, revoked, or removed by an earlier attempt whose answer
                // was lost): what was asked.
            }
            return nil

        case .unsubscribeAll(let device):
            var refused: [String] = []
            let all = try await client.list(as: uid)
            progress.answered = true
            for subscription in all where subscription.target == .device(device) {
                do {
                    try await client.delete(id: subscription.id, as: uid)
                } catch let error where error.code == .notFound {
                } catch let error where Self.disposition(of: error) == .refuse {
                    refused.append("\(Bounded.quoted(subscription.path)): \(error)")
                }
            }
            if !refused.isEmpty {
                throw PushClientError(.partialUpdate, "\(refused.count) subscriptions were not removed: " + refused.prefix(5).joined(separator: "; "))
            }
            return nil

        case .updateDeviceToken(let tokens, let to):
            let from = tokens.filter { $0 != to }
            guard !from.isEmpty else { return nil }
            // Resumable: what an earlier attempt moved is no longer listed under `from`, and
            // making a subscription again is idempotent (allowsUpdate).
            var moved = 0
            var refused: [String] = []
            let all = try await client.list(as: uid)
            progress.answered = true
            // The latest token's first, the earliest's last: where two tokens hold the same
            // node, the earliest's ends on the new token, as updates sent one by one leave it
            // (X → A moves X's over A's, then A → B moves that).
            var moving: [(rank: Int, subscription: NodeSubscription)] = []
            for subscription in all {
                guard case .device(let token) = subscription.target, let rank = from.firstIndex(of: token) else { continue }
                moving.append((rank, subscription))
            }
            moving.sort { $0.rank > $1.rank }
            for (_, subscription) in moving {
                do {
                    _ = try await client.create(PushDispatch.document(moving: subscription, to: to), allowsUpdate: true, as: uid)
                } catch let error where Self.disposition(of: error) == .refuse {
                    refused.append("\(Bounded.quoted(subscription.path)): \(error)")
                    continue
                }
                do {
                    try await client.delete(id: subscription.id, as: uid)
                } catch let error where error.code == .notFound {
                } catch let error where Self.disposition(of: error) == .refuse {
                    refused.append("\(Bounded.quoted(subscription.path)) (the former subscription \(subscription.id) is left): \(error)")
                }
                moved += 1
            }
            if !refused.isEmpty {
                throw PushClientError(
                    .partialUpdate,
                    "\(moved) subscriptions moved to the new token; \(refused.count) not: " + refused.prefix(5).joined(separator: "; "))
            }
            return nil
        }
    }
}
