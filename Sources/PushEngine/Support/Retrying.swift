import Logging
import PushCore
import PushContracts

/// Runs `body` until it succeeds, waiting longer after each failure (up to 5 s), logging each:
/// the store may be busy or the disk full for a while; giving up would lose data. Stops with
/// `CancellationError` when the task is cancelled (a hard stop: what is not committed is read
/// again after the restart), and passes a lost lease on at once: another instance owns the
/// application now, and retrying cannot help.
///
/// `health` is told while `what` is held up, and when it is not any more: it works again, or
/// it was given up (cancelled: a shared instance's socket connection whose client went away
/// while the store was down must not leave readiness at 503 for good).
func retryingIngestion<T>(_ what: String, health: StoreHealth? = nil, logger: Logger, _ body: () async throws -> T) async throws -> T {
    var delay = Duration.milliseconds(50)
    var failed = false
    defer { if failed { health?.recovered(what) } }
    while true {
        do {
            return try await body()
        } catch let error as StoreError where error.kind == .leaseLost {
            throw error
        } catch {
            try Task.checkCancellation()
            if failed { health?.stillFailing(what, reason: "\(error)") } else { health?.failing(what, reason: "\(error)") }
            failed = true
            logger.error("ingestion is held up; retrying", metadata: ["while": "\(what)", "error": "\(error)", "retryIn": "\(delay)"])
            try await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(5))
        }
    }
}
