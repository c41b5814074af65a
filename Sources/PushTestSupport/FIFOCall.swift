import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A call that must not wait in `open` on a FIFO, timed. The call runs on a thread of its own
/// (a test's task pool may be busy for seconds, which a detached task would wait out), so
/// the time measured is the call's own; a blocking `open`, which waits for a writer, is given
/// one after `rescueAfter` seconds, so that the test fails rather than hangs.
public enum FIFOCall {
    public static func timed<T: Sendable>(fifo: String, rescueAfter: TimeInterval = 10, _ body: @escaping @Sendable () -> T) async -> (T, Duration) {
        let rescue = Thread {
            Thread.sleep(forTimeInterval: rescueAfter)
            let writer = open(fifo, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
        }
        rescue.start()
        return await withCheckedContinuation { (continuation: CheckedContinuation<(T, Duration), Never>) in
            Thread {
                let started = ContinuousClock.now
                let value = body()
                continuation.resume(returning: (value, ContinuousClock.now - started))
            }.start()
        }
    }
}
