import Foundation
import PushFakes
import PushTestSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A socket client as a real one behaves: it sends records at a steady rate on its own thread,
/// reads the answers, and sends again what was not acknowledged. A line answered `ok:false` for
/// another reason than a repeat, or not answered within `answerTimeout`, is sent again (the
/// connection is closed and opened again, and every unanswered line goes again in order);
/// `seq` de-duplication makes resends safe: a resent line the service had committed is answered
/// `duplicate` (SPEC §4), which tells the client it is durable.
final class SteadyClient: Sendable {
    struct State {
        var nextSeq = 1
        /// Sent and not answered yet, oldest first: (seq, when sent).
        var pending: [(seq: Int, sentAt: Date)] = []
        /// Answered `ok:true`.
        var acknowledged: Set<Int> = []
        /// Answered `duplicate` (a resend of a line the service had committed).
        var repeats: Set<Int> = []
        /// Other refusals: (seq, reason).
        var refusals: [(Int, String)] = []
        /// Connections opened again after a silence or a refusal.
        var reconnects = 0
        /// Resent lines.
        var resent = 0
        /// When the last answer came (the longest silence is measured from it).
        var lastAnswer = Date()
        var longestSilence: TimeInterval = 0
        var sending = true
        var stop = false
    }

    let path: String
    let interval: TimeInterval
    let answerTimeout: TimeInterval
    let line: @Sendable (Int) -> String
    let state = Mutex(State())
    let finished = Mutex(false)

    /// - Parameters:
    ///   - interval: between two new records.
    ///   - line: the record with this `seq`.
    init(path: String, interval: TimeInterval, answerTimeout: TimeInterval = 5, line: @escaping @Sendable (Int) -> String) {
        self.path = path
        self.interval = interval
        self.answerTimeout = answerTimeout
        self.line = line
    }

    func start() {
        Thread { self.loop() }.start()
    }

    /// No new records; what is unanswered is still sent again until answered.
    func stopSending() { state.withLock { $0.sending = false } }

    /// Whether every record sent was answered (acknowledged, or answered as a duplicate).
    var settled: Bool { state.withLock { $0.pending.isEmpty && !$0.sending } }

    /// Ends the thread (after ``stopSending()`` and ``settled``).
    func end() async {
        state.withLock { $0.stop = true }
        while !finished.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(20)) }
    }

    /// Ends the thread without waiting (a test that fails must not leave it running).
    func halt() { state.withLock { $0.stop = true } }

    var snapshot: State { state.withLock { $0 } }

    func loop() {
        defer { finished.withLock { $0 = true } }
        var client: SocketClient?
        var buffer: [UInt8] = []
        var nextSend = Date()
        var reconnectNow = false
        while !state.withLock({ $0.stop }) {
            if client == nil || reconnectNow {
                client = nil  // its deinit closes the old connection
                client = try? SocketClient(path: path)
                buffer = []
                guard let client else {
                    Thread.sleep(forTimeInterval: 0.1)
                    continue
                }
                // Every unanswered line again, in order.
                let resend = state.withLock { state -> [Int] in
                    if reconnectNow {
                        state.reconnects += 1
                        state.resent += state.pending.count
                    }
                    state.pending = state.pending.map { ($0.seq, Date()) }
                    return state.pending.map(\.seq)
                }
                if !resend.isEmpty { client.send(resend.map { line($0) + "\n" }.joined()) }
                reconnectNow = false
            }
            guard let connection = client else { continue }
            let now = Date()
            if now >= nextSend {
                let seq = state.withLock { state -> Int? in
                    guard state.sending else { return nil }
                    defer { state.nextSeq += 1 }
                    state.pending.append((state.nextSeq, now))
                    return state.nextSeq
                }
                if let seq { connection.send(line(seq) + "\n") }
                nextSend = now.addingTimeInterval(interval)
            }
            // Answers, until the next send is due.
            var poller = pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0)
            let sending = state.withLock { $0.sending }
            let wait = sending ? Int32(max(1, min(50, nextSend.timeIntervalSinceNow * 1000))) : 50
            if poll(&poller, 1, wait) > 0 {
                var chunk = [UInt8](repeating: 0, count: 65_536)
                let read = chunk.withUnsafeMutableBytes { recv(connection.descriptor, $0.baseAddress, $0.count, 0) }
                if read <= 0 {
                    reconnectNow = true
                    continue
                }
                buffer += chunk[0..<read]
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let answer = String(decoding: buffer[..<newline], as: UTF8.self)
                    buffer.removeSubrange(...newline)
                    if !take(answer) { reconnectNow = true }
                }
            }
            // A silence past the timeout: the connection is given up, the lines sent again.
            let stale = state.withLock { state -> Bool in
                guard let oldest = state.pending.first else { return false }
                return Date().timeIntervalSince(oldest.sentAt) > answerTimeout
            }
            if stale { reconnectNow = true }
        }
        client = nil
    }

    /// Takes one answer; `false` when the line is to be sent again.
    func take(_ answer: String) -> Bool {
        guard let seqText = answer.split(separator: ",").first?.split(separator: ":").last, let seq = Int(seqText) else {
            state.withLock { $0.refusals.append((0, answer)) }
            return false
        }
        return state.withLock { state in
            let now = Date()
            state.longestSilence = max(state.longestSilence, now.timeIntervalSince(state.lastAnswer))
            state.lastAnswer = now
            guard let index = state.pending.firstIndex(where: { $0.seq == seq }) else { return true }  // an answer to an earlier connection's copy
            if answer.contains(#""ok":true,"duplicate":true"#) {
                state.pending.remove(at: index)
                state.repeats.insert(seq)
                return true
            }
            if answer.contains(#""ok":true"#) {
                state.pending.remove(at: index)
                state.acknowledged.insert(seq)
                return true
            }
            state.refusals.append((seq, answer))
            return false
        }
    }
}

/// Polls `/readyz` on its own thread: each answer's status with its time (0: no answer within
/// the deadline).
final class ReadinessWatcher: Sendable {
    let port: Int
    let samples = Mutex<[(at: Date, status: Int)]>([])
    let stopped = Mutex(false)

    init(port: Int) {
        self.port = port
        Thread {
            while !self.stopped.withLock({ $0 }) {
                let status = httpStatus("http://127.0.0.1:\(port)/readyz", timeout: 3)
                self.samples.withLock { $0.append((Date(), status)) }
                Thread.sleep(forTimeInterval: 0.1)
            }
        }.start()
    }

    func stop() { stopped.withLock { $0 = true } }

    /// The statuses seen since `date`.
    func statuses(since date: Date) -> [Int] { samples.withLock { $0.filter { $0.at >= date }.map(\.status) } }

    /// The first time `status` was seen since `date`.
    func first(_ status: Int, since date: Date) -> Date? { samples.withLock { $0.first { $0.at >= date && $0.status == status }?.at } }
}

/// The status of a GET (curl), 0 when nothing answered within `timeout` seconds.
func httpStatus(_ url: String, timeout: Double) -> Int {
    let process = TestProcesses.make(URL(fileURLWithPath: "/usr/bin/curl"), ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "\(timeout)", url])
    let output = Pipe()
    process.standardOutput = output
    guard (try? process.run()) != nil else { return 0 }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return Int(String(decoding: data, as: UTF8.self)) ?? 0
}

/// Resident memory of a process (`VmRSS` of `/proc/<pid>/status`), in KiB.
func residentKiB(_ pid: Int32) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return nil }
    return Int(line.split(separator: " ").dropFirst().first ?? "")
}

/// Waits for `condition` with a generous deadline (a loaded machine), polling off the
/// concurrency pool's hot path.
func waitFor(_ what: String, timeout: Double = 60, _ condition: () throws -> Bool) async throws {
    try await ServiceEndToEndTests.eventually(what, timeout: timeout, condition)
}
