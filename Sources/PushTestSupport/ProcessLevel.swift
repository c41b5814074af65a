import Foundation
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
        try await ProcessLevelLock.shared.run {
            let start = ContinuousClock.now
            defer { ProcessLevelTimes.note(test: test, took: ContinuousClock.now - start) }
            try await function()
        }
    }
}

/// With `TEST_PUSHDISPATCH_PROCESS_LEVEL_TIMES=<file>`, each process-level test case appends
/// `<seconds>\t<test>` to the file once it ran (the lock held, not the wait for it). They run
/// one at a time, so their sum is the test run's critical path: CI prints the slowest.
enum ProcessLevelTimes {
    static let file = ProcessInfo.processInfo.environment["TEST_PUSHDISPATCH_PROCESS_LEVEL_TIMES"].flatMap { $0.isEmpty ? nil : $0 }

    static func note(test: Test, took: Duration) {
        guard let file else { return }
        let seconds = Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
        let suite = test.id.nameComponents.dropLast().last ?? ""
        let name = "\(suite) / \(test.displayName ?? test.name)".replacingOccurrences(of: "\n", with: " ")
        let line = Array((String(format: "%.2f", seconds) + "\t" + name + "\n").utf8)
        let descriptor = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return }
        _ = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
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
