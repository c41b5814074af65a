import ArgumentParser
import Dispatch
import Foundation
import PushService

#if canImport(Glibc)
import Glibc
#endif

/// `pushdispatch-bench socket`: the service as a user runs it (`pushdispatch run`, a child
/// process) fed over its Unix socket by one client that keeps `--window` lines unanswered;
/// acks per second and round-trip times. The same client then drives a Python reference
/// server (asyncio, json, sqlite3 with group commit) on the same records.
struct BenchSocket: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "socket",
        abstract: "Acks per second over the Unix socket of `pushdispatch run`, with a Python reference server on the same records.")

    @Option(help: "Subscriptions in the store (at /users/{uid}/inbox).") var subscriptions = 10_000
    @Option(help: "Records to send.") var records = 100_000
    @Option(help: "Approximate size of each written value.") var valueBytes = 1_000
    @Option(help: "Lines the client keeps sent but not yet answered (1: one at a time, for latency).") var window = 4_000

    func run() async throws {
        let folder = try temporaryFolder("socket")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = try await IngestBenchmark.prepare(folder: folder, subscriptions: subscriptions, v2: false)
        let lines = IngestBenchmark.records(count: records, subscriptions: subscriptions, valueBytes: valueBytes)
        let config = """
            store: {sqlite: \(folder)/bench.db}
            ingest: {socket: \(folder)/in.sock, deadLetter: \(folder)/dead.ndjson}
            http: {port: 0}
            """
        try Data(config.utf8).write(to: URL(fileURLWithPath: folder + "/pushdispatch.yaml"))

        let service = Process()
        // `pushdispatch` is built next to `pushdispatch-bench`.
        service.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("pushdispatch")
        service.arguments = ["run", "--config", folder + "/pushdispatch.yaml", "--log-level", "warning"]
        try service.run()
        defer { if service.isRunning { service.terminate() } }
        let ours = try measure(socket: folder + "/in.sock", lines: lines, process: service)
        service.terminate()
        service.waitUntilExit()
        print(ours.summary("pushdispatch run", window: window))
        fflush(nil)

        guard let script = referenceScript("bench_socket_reference.py") else {
            print("reference: scripts/bench_socket_reference.py not found")
            return
        }
        let reference = Process()
        reference.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        reference.arguments = ["python3", script, folder + "/reference.sock", folder + "/reference.db"]
        reference.standardError = FileHandle.nullDevice
        do {
            try reference.run()
        } catch {
            print("reference: python3 not available")
            return
        }
        // The child inherits this process's blocked signals (SIGTERM among them): the
        // reference leaves by itself when its client does, SIGKILL otherwise.
        defer { if reference.isRunning { kill(reference.processIdentifier, SIGKILL) } }
        let theirs = try measure(socket: folder + "/reference.sock", lines: lines, process: reference)
        reference.waitUntilExit()
        print(theirs.summary("reference (Python asyncio + json + sqlite3 group commit, same client, same run)", window: window))
    }

    struct Measurement {
        var acks: Int
        var rejected: Int
        var seconds: Double
        /// Round-trip times, in seconds, of every 100th line.
        var roundTrips: [Double]

        func summary(_ name: String, window: Int) -> String {
            let sorted = roundTrips.sorted()
            func percentile(_ p: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] * 1000 }
            return String(
                format: "%@: %.0f acks/s (%d lines in %.2f s, window %d, %d refused); round trip p50 %.2f ms, p99 %.2f ms", name,
                Double(acks) / seconds, acks, seconds, window, rejected, percentile(0.5), percentile(0.99))
        }
    }

    /// Waits for the socket, sends every line keeping at most `window` unanswered, reads the
    /// answers (in order, one per line).
    func measure(socket path: String, lines: [[UInt8]], process: Process) throws -> Measurement {
        let deadline = Date().addingTimeInterval(120)
        var descriptor: Int32 = -1
        while descriptor < 0 {
            guard process.isRunning else { throw ValidationError("the server at \(path) exited (status \(process.terminationStatus))") }
            guard Date() < deadline else { throw ValidationError("nothing listens at \(path) after 120 s") }
            descriptor = connectUnix(path)
            if descriptor < 0 { usleep(50_000) }
        }
        defer { close(descriptor) }
        let permits = DispatchSemaphore(value: window)
        let times = SendTimes(count: lines.count)
        let sentAt = times.buffer
        let start = DispatchTime.now().uptimeNanoseconds
        let fd = descriptor
        let writer = Thread { [times] in
            var pending: [UInt8] = []
            for (index, line) in lines.enumerated() {
                if permits.wait(timeout: .now()) == .timedOut {
                    // The window is full: what is buffered goes out before waiting for answers.
                    if !pending.isEmpty {
                        if !sendAll(fd, pending) { return }
                        pending.removeAll(keepingCapacity: true)
                    }
                    permits.wait()
                }
                times.buffer[index] = DispatchTime.now().uptimeNanoseconds
                pending += line
                pending.append(UInt8(ascii: "\n"))
                // Lines are sent as soon as permitted; several at a time when they queue up.
                if pending.count >= 64 << 10 || index == lines.count - 1 || window < 64 {
                    if !sendAll(fd, pending) { return }
                    pending.removeAll(keepingCapacity: true)
                }
            }
        }
        writer.start()
        var answered = 0
        var rejected = 0
        var roundTrips: [Double] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var partial: [UInt8] = []
        while answered < lines.count {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { throw ValidationError("the server at \(path) closed the connection after \(answered) answers") }
            let now = DispatchTime.now().uptimeNanoseconds
            for byte in buffer[0..<count] {
                if byte == UInt8(ascii: "\n") {
                    if !partial.starts(with: Array(#"{"seq":"#.utf8)) || !String(decoding: partial, as: UTF8.self).contains(#""ok":true"#) {
                        rejected += 1
                    }
                    if answered % 100 == 0 { roundTrips.append(Double(now - sentAt[answered]) / 1e9) }
                    answered += 1
                    partial.removeAll(keepingCapacity: true)
                    permits.signal()
                } else {
                    partial.append(byte)
                }
            }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        withExtendedLifetime(times) {}
        return Measurement(acks: answered - rejected, rejected: rejected, seconds: seconds, roundTrips: roundTrips)
    }
}

/// When each line was sent, written by the sending thread before the line goes out and read by
/// the receiving one after its answer came back (the socket orders the two).
final class SendTimes: @unchecked Sendable {
    let buffer: UnsafeMutableBufferPointer<UInt64>

    init(count: Int) {
        buffer = .allocate(capacity: count)
        buffer.initialize(repeating: 0)
    }

    deinit { buffer.deallocate() }
}

/// A connected Unix stream socket, or -1.
func connectUnix(_ path: String) -> Int32 {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return -1 }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
        close(descriptor)
        return -1
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in bytes.enumerated() { raw[index] = byte }
    }
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    if result != 0 {
        close(descriptor)
        return -1
    }
    return descriptor
}

/// Sends all of `bytes`; `false` when the connection failed.
func sendAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let sent = bytes[offset...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if sent < 0 && errno == EINTR { continue }
        if sent <= 0 { return false }
        offset += sent
    }
    return true
}
