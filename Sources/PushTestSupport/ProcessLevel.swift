import Testing

/// Marks a suite (or a test) as process-level: it starts real processes (the service, a
/// PostgreSQL cluster, nginx, nghttpd, Python), or runs the service, a socket or a file tail in
/// this process, and waits on them with wall-clock deadlines. Process-level tests run one at a
/// time across every suite and test target of the run, while the pure ones stay parallel: side
/// by side on two cores they fail on time, not on behaviour.
///
/// `@Suite("…", .processLevel)`: every test of the suite (and of suites nested in it) takes
/// the one ``ProcessLevelLock`` for its whole run, each argument of a parameterised test
/// apart.
public struct ProcessLevelTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        // The suite itself runs no code of its own: its tests take the lock, one by one.
        guard testCase != nil else {
            try await function()
            return
        }
        try await ProcessLevelLock.shared.run(function)
    }
}

extension Trait where Self == ProcessLevelTrait {
    /// Runs the suite's or test's cases one at a time with every other process-level test.
    public static var processLevel: Self { ProcessLevelTrait() }
}

/// One holder at a time, first come first served, without blocking a thread while waiting.
public actor ProcessLevelLock {
    public static let shared = ProcessLevelLock()

    private var held = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Runs `body` holding the lock.
    public func run(_ body: @Sendable () async throws -> Void) async throws {
        await acquire()
        defer { release() }
        try await body()
    }

    private func acquire() async {
        guard held else {
            held = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func release() {
        if waiting.isEmpty {
            held = false
        } else {
            waiting.removeFirst().resume()
        }
    }
}
