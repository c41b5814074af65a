import Foundation

/// Runs `body` on a thread of its own whose stack is `stackSize` bytes, and returns its result:
/// for tests that a walk over the deepest input accepted fits a given stack. Overflowing it
/// crashes the test process, as it would crash the service.
public func runOnThread<T: Sendable>(stackSize: Int, _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.stackSize = stackSize
        thread.start()
    }
}
