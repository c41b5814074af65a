import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The shared nginx fake FCM of `../shared/bench` (`run_peer.sh --serve`, or
/// `run_peer_tls.sh --serve` for TLS + HTTP/2), started for one benchmark and stopped with it,
/// and the firebase-admin peer and h2load run against it.
struct PeerFake {
    /// `https://127.0.0.1:18443` (TLS) or `http://127.0.0.1:18090`.
    var base: String
    /// The CA file the fake's certificate is signed by (TLS only).
    var caFile: String?
    var pid: Int32
    /// The folder of the scripts and of `firebase_admin_peer.py`.
    var folder: String

    /// `../shared/bench` beside the repository (Sources/PushBench/ → the repository → its folder).
    static var defaultFolder: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("shared/bench").path
    }

    static func start(tls: Bool, folder: String?) throws -> PeerFake {
        let folder = folder ?? defaultFolder
        // nginx daemonises with the script's output open: run it through the shell into a
        // file (Foundation's Process waits for the daemon too).
        let log = NSTemporaryDirectory() + "pushdispatch-peer-\(UUID().uuidString).txt"
        defer { try? FileManager.default.removeItem(atPath: log) }
        // nginx must be able to get SIGTERM (see `withNoSignalBlocked`).
        let script = tls ? "run_peer_tls.sh" : "run_peer.sh"
        let status = withNoSignalBlocked { system("bash '\(folder)/\(script)' --serve > '\(log)' 2>&1 < /dev/null") }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        guard status == 0, let pid = text.split(separator: " ").last.flatMap({ Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
        else { throw ValidationError("\(script) --serve failed: \(text)") }
        guard tls else {
            return PeerFake(base: "http://127.0.0.1:\(ProcessInfo.processInfo.environment["PORT"] ?? "18090")", caFile: nil, pid: pid, folder: folder)
        }
        // "fake FCM at https://127.0.0.1:18443 (token_uri …); CA /tmp/…/ca.pem; nginx pid N"
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard let at = words.firstIndex(of: "at"), at + 1 < words.count, let caIndex = words.firstIndex(of: "CA"), caIndex + 1 < words.count
        else {
            kill(pid, SIGTERM)
            throw ValidationError("run_peer_tls.sh --serve printed: \(text)")
        }
        return PeerFake(base: String(words[at + 1]), caFile: String(words[caIndex + 1].trimmingCharacters(in: CharacterSet(charactersIn: ";"))), pid: pid, folder: folder)
    }

    func stop() { if pid > 0 { kill(pid, SIGTERM) } }

    /// The nginx processes' (master and workers) user + system CPU so far, in microseconds.
    func cpuMicroseconds() -> Int64 {
        var total: Int64 = 0
        for process in [pid] + ProcessCPU.children(of: pid) { total += ProcessCPU.microseconds(pid: process) ?? 0 }
        return total
    }

    /// firebase-admin's `send_each_async` (TLS) or `send_each` sending `messages` to the fake:
    /// its messages per second, its output printed; nil when it is not installed.
    func firebaseAdmin(messages: Int) throws -> Double? {
        try Self.firebaseAdmin(base: base, caFile: caFile, folder: folder, messages: messages)
    }

    /// The same against any fake: `caFile` for TLS (then `send_each_async`).
    static func firebaseAdmin(base: String, caFile: String?, folder: String, messages: Int) throws -> Double? {
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-W", "ignore", folder + "/firebase_admin_peer.py", "--url", base, "--n", String(messages)] + (caFile != nil ? ["--mode", "async"] : [])
        if let caFile { python.environment = ProcessInfo.processInfo.environment.merging(["SSL_CERT_FILE": caFile, "REQUESTS_CA_BUNDLE": caFile]) { $1 } }
        let output = Pipe()
        python.standardOutput = output
        try python.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        python.waitUntilExit()
        print(text, terminator: "")
        // "firebase-admin async: N messages in S s = R msg/s"
        let words = text.split(separator: " ")
        return words.firstIndex(of: "=").flatMap { $0 + 1 < words.count ? Double(words[$0 + 1]) : nil }
    }
}

/// Runs `body` (which starts a child) with no signal blocked on this thread, then restores the
/// mask. A child inherits the signal mask of the thread that starts it, and the threads of
/// Swift's concurrency pool block nearly every signal: nginx started from one could not be
/// stopped with SIGTERM, and a `perf record` never saw the SIGINT that should end it (the
/// benchmark waited for it forever).
func withNoSignalBlocked<T>(_ body: () throws -> T) rethrows -> T {
    var none = sigset_t()
    var old = sigset_t()
    sigemptyset(&none)
    pthread_sigmask(SIG_SETMASK, &none, &old)
    defer { pthread_sigmask(SIG_SETMASK, &old, nil) }
    return try body()
}

extension Process {
    /// Starts the process with no signal blocked (`withNoSignalBlocked`).
    func runUnblocked() throws {
        try withNoSignalBlocked { try run() }
    }
}

/// CPU time of other processes, from `/proc`.
enum ProcessCPU {
    /// The fields of `/proc/PID/stat` after "pid (comm) ": the state is `[0]`, the parent `[1]`,
    /// utime and stime `[11]` and `[12]`, the waited-for children's `[13]` and `[14]` (fields 3,
    /// 4, 14–17 of proc(5)); nil when the process is gone.
    static func stat(pid: Int32) -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    /// Clock ticks to microseconds.
    static func microseconds(ticks: Int64) -> Int64 {
        ticks * 1_000_000 / max(1, Int64(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// User + system CPU time of every thread of `pid` so far, in microseconds; nil when it is gone.
    static func microseconds(pid: Int32) -> Int64? {
        guard let fields = stat(pid: pid), fields.count > 13, let user = Int64(fields[11]), let system = Int64(fields[12]) else { return nil }
        return microseconds(ticks: user + system)
    }

    /// Context switches of every live thread of `pid` so far: the voluntary ones (a thread that
    /// went to sleep: each is a wake-up later) and the others (preempted); nil when it is gone.
    /// A thread that ended takes its counts with it.
    static func contextSwitches(pid: Int32) -> (voluntary: Int64, involuntary: Int64)? {
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
        var voluntary: Int64 = 0
        var involuntary: Int64 = 0
        for thread in threads {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/status", encoding: .utf8) else { continue }
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, let count = Int64(parts[1].trimmingCharacters(in: .whitespaces)) else { continue }
                if parts[0] == "voluntary_ctxt_switches" { voluntary += count }
                if parts[0] == "nonvoluntary_ctxt_switches" { involuntary += count }
            }
        }
        return (voluntary, involuntary)
    }

    /// The processes whose parent is `pid`.
    static func children(of pid: Int32) -> [Int32] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { Int32($0) }.filter { child in
            guard let fields = stat(pid: child) else { return false }
            return fields.count > 1 && Int32(fields[1]) == pid
        }
    }

    /// `/proc/PID/smaps_rollup`'s resident, anonymous and file-backed sizes, in MiB.
    static func memory(pid: Int32) -> (rss: Double, anonymous: Double, file: Double)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else { return nil }
        func kib(_ name: String) -> Double {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
            return Double(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        let rss = kib("Rss"), anonymous = kib("Anonymous")
        return (rss / 1024, anonymous / 1024, (rss - anonymous) / 1024)
    }
}

extension ProcessCPU {
    /// User + system CPU of `pid`, of its live children, and of its children that ended and were
    /// waited for (a PostgreSQL server: the postmaster, its backends, and the backends gone), in
    /// microseconds; nil when `pid` is gone.
    static func treeMicroseconds(pid: Int32) -> Int64? {
        guard let fields = stat(pid: pid), fields.count > 15 else { return nil }
        var total = microseconds(ticks: fields[11...14].compactMap { Int64($0) }.reduce(0, +))
        for child in children(of: pid) { total += microseconds(pid: child) ?? 0 }
        return total
    }
}
