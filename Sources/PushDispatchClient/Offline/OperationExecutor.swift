import PushCore
import PushJSON

/// Sends one queued operation to the service, and says what its failure means for the queue.
struct OperationExecutor: Sendable {
    let client: SubscriptionClient

    /// What the queue does after a failure.
    enum Disposition: Equatable {
        /// Try again later (back-off with jitter): no answer, or the service could not answer.
        case retry
        /// Stop sending until the credentials change: the service refused the token even
        /// after a fresh one was asked for, or the credentials provider failed.
        case suspend
        /// This operation alone is refused for good; the others go on.
        case refuse
    }

    /// The disposition of `error`. Answers that a later attempt may change are retried; the
    /// token's refusal suspends the queue; every other answer is the service's word on this
    /// operation.
    static func disposition(of error: PushClientError) -> Disposition {
        switch error.code {
        case .transport, .unavailable, .internalError, .invalidResponse: return .retry
        case .unauthorized, .credentials: return .suspend
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
    func execute(_ operation: PendingOperation) async -> Result<NodeSubscription?, PushClientError> {
        let progress = Progress()
        do {
            return .success(try await send(operation, progress))
        } catch {
            var failure = error
            // A compound operation that got some answers did reach the service.
            if progress.answered { failure.neverSent = false }
            return .failure(failure)
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

        case .updateDeviceToken(let from, let to):
            guard from != to else { return nil }
            // Resumable: what an earlier attempt moved is no longer listed under `from`, and
            // making a subscription again is idempotent (allowsUpdate).
            var moved = 0
            var refused: [String] = []
            let all = try await client.list(as: uid)
            progress.answered = true
            for subscription in all where subscription.target == .device(from) {
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
