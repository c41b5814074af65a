import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Child processes of tests (the `pushdispatch` executable, Python helpers) that die with the
/// test process, pass or fail: each runs under `setpriv --pdeathsig KILL` (the kernel kills it
/// when its parent goes, even by SIGKILL), and the ones still running when the test process
/// exits normally are killed then too.
///
/// Start them with ``launch(_:)``, not `Process.run()`: the kernel's "parent" is the *thread*
/// that forked, and a thread of the concurrency pool that sits idle is ended by the pool, which
/// killed a service in the middle of a test. ``launch(_:)`` forks from one thread that lives as
/// long as the test process.
public enum TestProcesses {
    private static let running = Mutex<[Process]>([])
    private static let registered = Mutex(false)
    private static let spawner = Spawner()

    /// Runs `process` to its end: what it wrote to standard output and standard error,
    /// together.
    public static func output(_ process: Process) throws -> String {
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try launch(process)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return text
    }

    /// Starts `process` from the thread that lives as long as this process (see above).
    public static func launch(_ process: Process) throws {
        let outcome = Mutex<Result<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        spawner.run {
            let result = Result { try process.run() }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        try outcome.withLock { $0! }.get()
    }

    /// One thread that never ends, running jobs in order.
    final class Spawner: @unchecked Sendable {
        // @unchecked Sendable: `jobs` is guarded by `condition`.
        private let condition = NSCondition()
        private var jobs: [@Sendable () -> Void] = []

        init() {
            let thread = Thread { [self] in
                while true {
                    condition.lock()
                    while jobs.isEmpty { condition.wait() }
                    let job = jobs.removeFirst()
                    condition.unlock()
                    job()
                }
            }
            thread.name = "test-process-spawner"
            thread.start()
        }

        func run(_ job: @escaping @Sendable () -> Void) {
            condition.lock()
            jobs.append(job)
            condition.signal()
            condition.unlock()
        }
    }

    /// A process for `executable arguments…` that dies with this one; start it with `run()`.
    public static func make(_ executable: URL, _ arguments: [String]) -> Process {
        let process = Process()
        let setpriv = "/usr/bin/setpriv"
        if FileManager.default.isExecutableFile(atPath: setpriv) {
            process.executableURL = URL(fileURLWithPath: setpriv)
            process.arguments = ["--pdeathsig", "KILL", "--", executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        track(process)
        return process
    }

    /// A process for a command found on `PATH` (`python3`, `curl`), dying with this one.
    public static func make(command: String, _ arguments: [String]) -> Process {
        make(URL(fileURLWithPath: "/usr/bin/env"), [command] + arguments)
    }

    static func track(_ process: Process) {
        running.withLock { list in
            list.removeAll { !$0.isRunning && $0.processIdentifier != 0 }
            list.append(process)
        }
        let first = registered.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        if first { atexit { TestProcesses.killAll() } }
    }

    /// Kills every tracked process still running (at exit).
    public static func killAll() {
        for process in running.withLock({ $0 }) where process.processIdentifier > 0 && process.isRunning {
            kill(process.processIdentifier, SIGKILL)
        }
    }
}

/// Python packages some tests check against (the Standard Webhooks reference library,
/// Prometheus's own exposition parser): installed with pip when missing, so that `swift test`
/// passes on a fresh machine by itself.
public enum PythonPackages {
    private static let checked = Mutex<Set<String>>([])

    /// Makes sure `python3` can import `module`, installing `package` (default: the module's
    /// name) with pip when it cannot; pip runs under a file lock, so test processes side by
    /// side do not race. Throws with pip's output when it cannot be installed.
    public static func require(_ module: String, package: String? = nil) throws {
        if checked.withLock({ $0.contains(module) }) { return }
        if try run(["python3", "-c", "import \(module)"]).status != 0 {
            let install = try run([
                "flock", NSTemporaryDirectory() + "pushdispatch-pip.lock", "python3", "-m", "pip", "install", "--quiet",
                "--disable-pip-version-check", package ?? module,
            ])
            guard try run(["python3", "-c", "import \(module)"]).status == 0 else {
                throw PythonPackageError(
                    description: "python3 cannot import \(module), and `pip install \(package ?? module)` failed (status \(install.status)): \(install.output)")
            }
        }
        _ = checked.withLock { $0.insert(module) }
    }

    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = TestProcesses.make(command: arguments[0], Array(arguments.dropFirst()))
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try TestProcesses.launch(process)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, String(text.suffix(2_000)))
    }
}

public struct PythonPackageError: Error, CustomStringConvertible {
    public let description: String
}
