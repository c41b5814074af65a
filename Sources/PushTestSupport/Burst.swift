/// Load for the transport tests: `count` calls of `send`, `concurrency` at a time.
public enum Burst {
    /// Each call's result by index, and the longest a call took.
    public static func run<Answer: Sendable, Failure: Error>(
        count: Int, concurrency: Int, _ send: @escaping @Sendable (Int) async throws(Failure) -> Answer
    ) async -> (results: [Int: Result<Answer, Failure>], longest: Duration) {
        await withTaskGroup(of: (Int, Result<Answer, Failure>, Duration).self) { group in
            var next = 0
            var results: [Int: Result<Answer, Failure>] = [:]
            var longest = Duration.zero
            func add() {
                let index = next
                next += 1
                group.addTask {
                    let start = ContinuousClock.now
                    do throws(Failure) {
                        return (index, .success(try await send(index)), ContinuousClock.now - start)
                    } catch {
                        return (index, .failure(error), ContinuousClock.now - start)
                    }
                }
            }
            while next < min(count, concurrency) { add() }
            for await (index, result, took) in group {
                results[index] = result
                longest = max(longest, took)
                if next < count { add() }
            }
            return (results, longest)
        }
    }
}
