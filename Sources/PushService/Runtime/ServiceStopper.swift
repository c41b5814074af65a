import ServiceLifecycle
import Synchronization

/// Stops a running service gracefully, as SIGTERM does (the demo and tests use it).
public final class ServiceStopper: Sendable {
    let state = Mutex<(group: ServiceGroup?, stopped: Bool)>((nil, false))

    public init() {}

    func attach(_ group: ServiceGroup) {
        let stopped = state.withLock { state -> Bool in
            state.group = group
            return state.stopped
        }
        if stopped { Task { await group.triggerGracefulShutdown() } }
    }

    /// Asks the service to stop: ingest stops, what was taken is committed, the sends in flight
    /// finish, the store closes.
    public func stop() {
        let group = state.withLock { state -> ServiceGroup? in
            state.stopped = true
            return state.group
        }
        if let group { Task { await group.triggerGracefulShutdown() } }
    }
}
