import PushCore
import ServiceLifecycle

/// Sleeps for `duration` on `clock`; `false` when the service is shutting down or cancelled
/// instead.
func pause(_ duration: Duration, on clock: any ServiceClock) async -> Bool {
    do {
        try await cancelWhenGracefulShutdown { try await clock.sleep(for: duration) }
        return true
    } catch {
        return false
    }
}
