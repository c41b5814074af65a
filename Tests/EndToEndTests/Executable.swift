import Foundation
import PushTestSupport

/// Runs the built `pushdispatch` executable.
enum Executable {
    /// `TEST_PUSHDISPATCH_BIN`, or the `pushdispatch` built next to the test bundle.
    static var url: URL {
        if let path = ProcessInfo.processInfo.environment["TEST_PUSHDISPATCH_BIN"] {
            return URL(fileURLWithPath: path)
        }
        let testBinary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return testBinary.deletingLastPathComponent().appendingPathComponent("pushdispatch")
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        var lines: [String] {
            var lines = stdout.components(separatedBy: "\n")
            if lines.last == "" { lines.removeLast() }
            return lines
        }
    }

    /// Runs `pushdispatch arguments…` with `input` on standard input.
    static func run(_ arguments: [String], input: String = "") throws -> Result {
        try run(url, arguments, input: input)
    }

    /// Runs `executable arguments…` with `input` on standard input and `environment` added.
    static func run(_ executable: URL, _ arguments: [String], input: String = "", environment: [String: String] = [:]) throws -> Result {
        let process = TestProcesses.make(executable, arguments)
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try TestProcesses.launch(process)
        // Write and read concurrently so large inputs cannot dead-lock on full pipes.
        let writer = Thread {
            stdin.fileHandleForWriting.write(Data(input.utf8))
            try? stdin.fileHandleForWriting.close()
        }
        writer.start()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self))
    }
}
