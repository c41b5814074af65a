import PushCore
import PushJSON
import Synchronization

/// The bounded queue between the sources and the pipeline. Senders wait while it holds
/// ``capacityBytes`` of lines (back-pressure: a socket connection stops being read, the queue
/// file stops being tailed); the pipeline takes lines in batches.
public final class IngestQueue: Sendable {
    private struct State {
        var lines: [IngestLine] = []
        var head = 0
        var bytes = 0
        var finished = false
        /// Woken without lines (``wake()``): the next `receive` returns empty at once.
        var woken = false
        var receiver: CheckedContinuation<Void, Never>?
        var senders: [(UInt64, CheckedContinuation<Void, Never>)] = []
        var nextSender: UInt64 = 0
    }

    /// Bytes of lines the queue holds before senders wait.
    public let capacityBytes: Int
    private let state = Mutex(State())

    public init(capacityBytes: Int = 32 << 20) {
        self.capacityBytes = capacityBytes
    }

    /// Queues a line, waiting while the queue is full. Returns `false` (the line is not queued)
    /// once the queue is finished.
    @discardableResult
    public func send(_ line: IngestLine) async -> Bool {
        while true {
            enum Step { case queued(CheckedContinuation<Void, Never>?), wait, finished }
            let step = state.withLock { state -> Step in
                if state.finished { return .finished }
                // A line larger than the whole capacity still goes in when the queue is empty.
                if state.bytes > 0 && state.bytes + line.bytes.count > capacityBytes { return .wait }
                state.lines.append(line)
                state.bytes += line.bytes.count
                let receiver = state.receiver
                state.receiver = nil
                return .queued(receiver)
            }
            switch step {
            case .queued(let receiver):
                receiver?.resume()
                return true
            case .finished:
                return false
            case .wait:
                if Task.isCancelled { return false }
                let id = state.withLock { state -> UInt64 in
                    state.nextSender += 1
                    return state.nextSender
                }
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let resumeNow = state.withLock { state -> Bool in
                            if state.finished || state.bytes + line.bytes.count <= capacityBytes || state.bytes == 0 || Task.isCancelled {
                                return true
                            }
                            state.senders.append((id, continuation))
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                } onCancel: {
                    let sender = state.withLock { state -> CheckedContinuation<Void, Never>? in
                        guard let index = state.senders.firstIndex(where: { $0.0 == id }) else { return nil }
                        return state.senders.remove(at: index).1
                    }
                    sender?.resume()
                }
                if Task.isCancelled { return false }
            }
        }
    }

    /// Up to `limit` lines (or `byteLimit` bytes), waiting for at least one; empty once the
    /// queue is finished and drained, when the waiting task is cancelled, or when woken
    /// (``wake()``).
    public func receive(limit: Int, byteLimit: Int = 8 << 20) async -> [IngestLine] {
        while true {
            enum Step { case lines([IngestLine], [(UInt64, CheckedContinuation<Void, Never>)]), wait, done }
            let step = state.withLock { state -> Step in
                let available = state.lines.count - state.head
                if available == 0 {
                    if state.finished { return .done }
                    if state.woken {
                        state.woken = false
                        return .done
                    }
                    return .wait
                }
                var taken: [IngestLine] = []
                var bytes = 0
                while state.head < state.lines.count && taken.count < limit && (taken.isEmpty || bytes < byteLimit) {
                    let line = state.lines[state.head]
                    state.head += 1
                    bytes += line.bytes.count
                    taken.append(line)
                }
                state.bytes -= bytes
                state.woken = false  // the consumer looks at its other work with these lines
                if state.head == state.lines.count {
                    state.lines.removeAll(keepingCapacity: true)
                    state.head = 0
                } else if state.head > 4096 && state.head * 2 > state.lines.count {
                    state.lines.removeFirst(state.head)
                    state.head = 0
                }
                let senders = state.senders
                state.senders = []
                return .lines(taken, senders)
            }
            switch step {
            case .lines(let lines, let senders):
                for sender in senders { sender.1.resume() }
                return lines
            case .done:
                return []
            case .wait:
                if Task.isCancelled { return [] }
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let resumeNow = state.withLock { state -> Bool in
                            if state.finished || state.woken || state.lines.count > state.head || Task.isCancelled { return true }
                            state.receiver = continuation
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                } onCancel: {
                    let receiver = state.withLock { state -> CheckedContinuation<Void, Never>? in
                        defer { state.receiver = nil }
                        return state.receiver
                    }
                    receiver?.resume()
                }
                if Task.isCancelled { return [] }
            }
        }
    }

    /// No more lines are accepted; waiting senders return `false`, the receiver drains what is
    /// queued.
    public func finish() {
        let (receiver, senders) = state.withLock { state in
            state.finished = true
            defer {
                state.receiver = nil
                state.senders = []
            }
            return (state.receiver, state.senders)
        }
        receiver?.resume()
        for sender in senders { sender.1.resume() }
    }

    /// Bytes of lines waiting.
    public var queuedBytes: Int { state.withLock { $0.bytes } }

    /// Whether it was finished and every line taken: an empty `receive` means the end.
    public var isDone: Bool { state.withLock { $0.finished && $0.lines.count == $0.head } }

    /// Wakes the receiver without lines: its waiting `receive` (or the next one) returns empty
    /// while the queue goes on (``isDone`` tells the two apart). The consumer has work that is
    /// not a line (subscriptions to admit).
    public func wake() {
        let receiver = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.woken = true
            defer { state.receiver = nil }
            return state.receiver
        }
        receiver?.resume()
    }
}

/// Something to wake up: a consumer has work that is not a line.
public protocol Wakeable: Sendable {
    func wake()
}

extension IngestQueue: Wakeable {}
