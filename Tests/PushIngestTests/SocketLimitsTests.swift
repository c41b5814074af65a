import Foundation
import Logging
import PushCore
import PushContracts
@testable import PushIngest
import PushFakes
import PushTestSupport
import ServiceLifecycle
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Tells when the source listens.
final class Ready: SourceReadiness {
    let attached = Mutex(false)
    func attached(_ source: String) { attached.withLock { $0 = true } }
    func failing(_ source: String, reason: String?) {}
}

/// The limits of `ingest.socket*`: who may connect, how many, for how long idle, how much one
/// connection holds, and that no client holds a shutdown.
@Suite("The Unix socket's limits", .serialized, .processLevel)
struct SocketLimitsTests {
    /// Runs a socket source with `limits` in a service group (so that a graceful shutdown reaches
    /// it, as in `run`) while `body` runs, then shuts it down gracefully. When `complete`, every
    /// line queued is answered as accepted. Returns how long the shutdown took.
    @discardableResult
    func withSource(
        _ limits: SocketLimits, complete: Bool = true, _ body: (String, IngestQueue) async throws -> Void
    ) async throws -> Duration {
        let path = "/tmp/pd-\(UInt32.random(in: 0...UInt32.max)).sock"
        let queue = IngestQueue(capacityBytes: 64 << 20)
        var logger = Logger(label: "test")
        logger.logLevel = .error
        let ready = Ready()
        let source = UnixSocketSource(path: path, queue: queue, limits: limits, readiness: ready, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [.init(service: source)], logger: logger))
        let running = Task { try await group.run() }
        let consumer = Task {
            guard complete else { return }
            while true {
                let lines = await queue.receive(limit: 1000)
                if lines.isEmpty && queue.isDone { return }
                for line in lines { line.ack?.complete(.accepted(seq: line.position)) }
            }
        }
        defer {
            queue.finish()
            consumer.cancel()
            try? FileManager.default.removeItem(atPath: path)
        }
        // Told once it listens (a probe would be a connection, and take a slot).
        for _ in 0..<1000 where !ready.attached.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        do {
            try await body(path, queue)
        } catch {
            running.cancel()
            _ = await running.result
            throw error
        }
        let start = ContinuousClock.now
        await group.triggerGracefulShutdown()
        // A source that never stops would hang the suite: wait 30 s at most, then say so.
        let stopped = await withTaskGroup(of: Bool.self) { waiting in
            waiting.addTask {
                _ = await running.result
                return true
            }
            waiting.addTask {
                try? await Task.sleep(for: .seconds(30))
                return false
            }
            let first = await waiting.next()!
            waiting.cancelAll()
            return first
        }
        #expect(stopped, "the socket source did not stop within 30 s of a graceful shutdown")
        if !stopped {
            running.cancel()
            _ = await running.result
        }
        return ContinuousClock.now - start
    }

    /// `count` lines of about `size` bytes each.
    func lines(_ count: Int, size: Int) -> [UInt8] {
        let line = Array(("{\"seq\":1,\"pad\":\"" + String(repeating: "p", count: max(0, size - 20)) + "\"}\n").utf8)
        var stream: [UInt8] = []
        stream.reserveCapacity(line.count * count)
        for _ in 0..<count { stream += line }
        return stream
    }

    /// Sends `stream` from `offset` without blocking, until all is sent, `seconds` passed, or
    /// the socket took nothing for `patience` × 20 ms (the source stopped reading): where it stopped.
    func push(_ client: SocketClient, _ stream: [UInt8], from offset: Int, seconds: Double, patience: Int = 15) async throws -> Int {
        var sent = offset
        var stalled = 0
        let end = Date().addingTimeInterval(seconds)
        while sent < stream.count && Date() < end && stalled < patience {
            let taken = client.trySend(stream[sent..<min(stream.count, sent + 65_536)])
            if taken > 0 {
                sent += taken
                stalled = 0
            } else {
                stalled += 1
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        return sent
    }

    @Test("the socket file gets ingest.socketMode before anyone can connect; a stale socket is replaced, another file is not")
    func mode() async throws {
        for mode: UInt16 in [0o660, 0o600, 0o666] {
            try await withSource(SocketLimits(mode: mode)) { path, _ in
                var info = stat()
                #expect(lstat(path, &info) == 0)
                #expect(info.st_mode & 0o7777 == mode_t(mode), "mode \(String(info.st_mode & 0o7777, radix: 8)), expected \(String(mode, radix: 8))")
            }
        }
        let path = "/tmp/pd-\(UInt32.random(in: 0...UInt32.max)).sock"
        let descriptor = try listeningSocket(at: path, mode: 0o600, backlog: 1)
        close(descriptor)
        #expect(!someoneListens(at: path))  // the socket file of a stopped process
        let again = try listeningSocket(at: path, mode: 0o640, backlog: 1)
        var info = stat()
        #expect(lstat(path, &info) == 0 && info.st_mode & 0o7777 == 0o640)
        #expect(someoneListens(at: path))
        close(again)
        unlink(path)
        FileManager.default.createFile(atPath: path, contents: Data("not a socket".utf8))
        #expect(throws: IngestError.self) { _ = try listeningSocket(at: path, mode: 0o600, backlog: 1) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "not a socket")
        unlink(path)
    }

    @Test("connections over the limit are told why and closed; a freed slot is taken again")
    func maxConnections() async throws {
        try await withSource(SocketLimits(maxConnections: 2)) { path, _ in
            var first: SocketClient? = try SocketClient(path: path)
            let second = try SocketClient(path: path)
            for client in [first!, second] {
                client.send("{\"seq\":1}\n")
                #expect(try await onThread { client.answers(1, timeout: 10) } == [#"{"seq":1,"ok":true}"#])
            }
            let third = try SocketClient(path: path)
            let refused = try await onThread { third.readUntilClosed(timeout: 10) }
            #expect(refused.closed)
            #expect(refused.text.contains("too many connections: 2 are open (ingest.socketMaxConnections)"), "\(refused.text)")
            first = nil  // closes it: its slot frees once the service sees the end
            var admitted = false
            for _ in 0..<100 where !admitted {
                let next = try SocketClient(path: path)
                next.send("{\"seq\":2}\n")
                admitted = try await onThread { next.answers(1, timeout: 5) } == [#"{"seq":1,"ok":true}"#]
                if !admitted { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(admitted, "no connection was admitted after one of the two closed")
            _ = first
        }
    }

    @Test("a connection idle past ingest.socketIdleTimeout is closed; one that sends is not")
    func idleTimeout() async throws {
        try await withSource(SocketLimits(idleTimeout: .seconds(2))) { path, _ in
            let idle = try SocketClient(path: path)
            let busy = try SocketClient(path: path)
            let start = Date()
            async let closed = onThread { idle.readUntilClosed(timeout: 30) }
            // A line every 300 ms for longer than the timeout: never idle.
            var answered = 0
            var sent = 0
            while Date().timeIntervalSince(start) < 3.5 {
                sent += 1
                busy.send("{\"seq\":\(sent)}\n")
                answered += try await onThread { busy.answers(1, timeout: 10) }.count
                try await Task.sleep(for: .milliseconds(300))
            }
            let outcome = try await closed
            #expect(outcome.closed)
            let after = Date().timeIntervalSince(start)
            #expect(after >= 1.9 && after < 30, "the idle connection closed after \(after) s")
            sent += 1
            busy.send("{\"seq\":\(sent)}\n")
            answered += try await onThread { busy.answers(1, timeout: 10) }.count
            #expect(answered == sent, "the busy connection was closed: \(answered) answers to \(sent) lines")
        }
    }

    @Test("a client waiting for answers the service owes it is not idle, however slow the commit")
    func owedIsNotIdle() async throws {
        try await withSource(SocketLimits(idleTimeout: .seconds(1)), complete: false) { path, queue in
            let client = try SocketClient(path: path)
            client.send("{\"seq\":1}\n")
            let lines = await queue.receive(limit: 1)
            // Three idle timeouts with the answer owed: still open.
            let waiting = try await onThread { client.readUntilClosed(timeout: 3.5) }
            #expect(!waiting.closed && waiting.text.isEmpty)
            lines.first?.ack?.complete(.accepted(seq: 1))
            #expect(try await onThread { client.answers(1, timeout: 10) } == [#"{"seq":1,"ok":true}"#])
            // Answered, and nothing more sent: now idle.
            #expect(try await onThread { client.readUntilClosed(timeout: 20) }.closed)
        }
    }

    @Test("what one connection has sent and not had answered is bounded in bytes, not in lines; a longer line alone passes")
    func bufferedBytes() async throws {
        let budget = 64 << 10
        try await withSource(SocketLimits(maxBufferedBytes: budget), complete: false) { path, queue in
            let client = try SocketClient(path: path)
            // 2,000 lines of 1 KiB, nobody answering: the source takes ~60 of them, then stops
            // reading. (Sent until the queue holds most of the budget and the socket takes no
            // more: on a loaded machine the source may be slow to start reading.)
            let stream = lines(2000, size: 1024)
            var sent = 0
            let end = Date().addingTimeInterval(60)
            while Date() < end && (queue.queuedBytes < budget * 3 / 4 || sent == 0) {
                sent = try await push(client, stream, from: sent, seconds: 1)
            }
            sent = try await push(client, stream, from: sent, seconds: 2)
            try await Task.sleep(for: .milliseconds(300))
            #expect(sent < stream.count)
            #expect(queue.queuedBytes <= budget, "the connection's unanswered lines hold \(queue.queuedBytes) bytes")
            #expect(queue.queuedBytes >= budget * 3 / 4, "the source stopped early: \(queue.queuedBytes) bytes")
            // Another connection has its own budget; a line longer than a whole budget goes alone.
            let other = try SocketClient(path: path)
            let before = queue.queuedBytes
            other.send("{\"seq\":1,\"pad\":\"" + String(repeating: "q", count: 100 << 10) + "\"}\n")
            for _ in 0..<500 where queue.queuedBytes == before { try await Task.sleep(for: .milliseconds(10)) }
            #expect(queue.queuedBytes > before + (100 << 10), "the other connection's long line did not reach the queue")
            // Answering frees the budget: the rest is read, and every line answered.
            let drain = Task {
                while true {
                    let lines = await queue.receive(limit: 500)
                    if lines.isEmpty && queue.isDone { return }
                    for line in lines { line.ack?.complete(.accepted(seq: line.position)) }
                }
            }
            let reader = Task { try await onThread { client.answers(2000, timeout: 90) }.count }
            sent = try await push(client, stream, from: sent, seconds: 60, patience: .max)
            #expect(sent == stream.count)
            #expect(try await reader.value == 2000)
            drain.cancel()
        }
    }

    @Test("a client that stops reading its answers holds neither the other clients nor a graceful shutdown")
    func stuckClient() async throws {
        let grace = Duration.seconds(1)
        let answeredBeforeClose = Mutex(0)
        // Connected through the shutdown: a client gone is not stuck (its connection ends at once).
        let kept = Mutex<SocketClient?>(nil)
        let took = try await withSource(SocketLimits(shutdownGrace: grace)) { path, queue in
            let stuck = try SocketClient(path: path)
            kept.withLock { $0 = stuck }
            // 200,000 short lines, their answers never read: the answers fill the socket, the
            // rest wait unwritten with their budget, and the source stops reading it.
            let stream = lines(200_000, size: 24)
            let sent = try await push(stuck, stream, from: 0, seconds: 20)
            #expect(sent < stream.count, "the stuck client sent everything: make the flood larger")
            let other = try SocketClient(path: path)
            other.send((1...50).map { "{\"seq\":\($0)}\n" }.joined())
            let answers = try await onThread { other.answers(50, timeout: 20) }
            #expect(answers.count == 50, "another client got \(answers.count) of 50 answers beside the stuck one")
            answeredBeforeClose.withLock { $0 = answers.count }
            _ = queue
        }
        #expect(answeredBeforeClose.withLock { $0 } == 50)
        #expect(took < grace + .seconds(10), "the graceful shutdown took \(took) with a client not reading (grace \(grace))")
        #expect(took >= grace - .milliseconds(100), "the stuck connection was closed before its grace: \(took)")
        kept.withLock { $0 = nil }
    }

    @Test("a client that goes away with its answers stuck frees its connection at once, not at the next shutdown")
    func stuckClientGone() async throws {
        _ = try await withSource(SocketLimits(maxConnections: 1)) { path, _ in
            do {
                let stuck = try SocketClient(path: path)
                // Answers never read: the connection's budget fills and its reading stops.
                let stream = lines(200_000, size: 24)
                let sent = try await push(stuck, stream, from: 0, seconds: 20)
                #expect(sent < stream.count, "the stuck client sent everything: make the flood larger")
                withExtendedLifetime(stuck) {}
            }
            // Its client gone, its slot is free: the next client is served, not refused.
            var answers: [String] = []
            for _ in 0..<100 {
                let next = try SocketClient(path: path)
                next.send("{\"seq\":1}\n")
                answers = try await onThread { next.answers(1, timeout: 5) }
                if answers.first.map({ !$0.contains("too many connections") }) ?? false { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(answers.count == 1 && !answers[0].contains("too many connections"), "\(answers)")
        }
    }
}
