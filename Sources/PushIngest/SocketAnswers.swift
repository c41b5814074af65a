import NIOCore
import PushContracts
import Synchronization

/// One socket connection's answers, written in the order of its lines as their records
/// complete, from the connection's event loop.
///
/// No task waits for each answer: a completed answer schedules one pass on the event loop (at
/// most one is scheduled at a time), which writes every answer ready at the head of the line, in
/// one buffer and one flush. (A task awaiting each answer in turn cost a thread wake-up per
/// record at a trickle, then a second one to hand the write to the event loop.)
///
/// Backpressure is the same as the connection's writer's: while the channel is not writable (its
/// client does not read its answers), answers stay here, the connection's budget is not given
/// back, and its reading stops once the budget is spent. ``SocketAnswersHandler`` resumes the
/// writing when the channel is writable again.
final class SocketAnswers: Sendable {
    private struct State {
        /// The lines read, in order, with what each took from the budget.
        var lines = CircularBuffer<(ack: IngestAck, cost: Int)>()
        var scheduled = false
        /// Writes handed to the channel and not yet done.
        var writing = 0
        /// No line comes any more (``finish()``).
        var finished = false
        /// The channel closed: nothing more is written.
        var closed = false
        var finishing: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())
    let channel: any Channel
    let budget: ConnectionBudget

    init(channel: any Channel, budget: ConnectionBudget) {
        self.channel = channel
        self.budget = budget
    }

    /// A line handed to the pipeline: its answer is written in its turn. `false` when the
    /// channel closed (the line's budget is given back: stop reading).
    func append(_ ack: IngestAck, cost: Int) -> Bool {
        let kept = state.withLock { state -> Bool in
            // Closed: its answer has nowhere to go (the reading ends with the channel).
            guard !state.closed else { return false }
            state.lines.append((ack, cost))
            return true
        }
        guard kept else {
            budget.release(cost)
            return false
        }
        ack.whenComplete { [self] _ in completed() }
        return true
    }

    /// An answer is known: a pass on the event loop, unless one is scheduled already or the
    /// channel is not writable (``SocketAnswersHandler`` writes when it is again).
    private func completed() {
        guard channel.isWritable else { return }
        let schedule = state.withLock { state -> Bool in
            guard !state.scheduled, !state.closed else { return false }
            state.scheduled = true
            return true
        }
        if schedule { channel.eventLoop.execute { self.write() } }
    }

    /// On the event loop: writes the answers ready at the head of the line, while the channel
    /// is writable.
    func write() {
        guard !state.withLock({ $0.closed }) else { return }
        let writable = channel.isWritable
        let ready = state.withLock { state -> [(result: AckResult, cost: Int)] in
            state.scheduled = false
            guard writable else { return [] }
            var ready: [(result: AckResult, cost: Int)] = []
            while let head = state.lines.first, let result = head.ack.completed {
                state.lines.removeFirst()
                ready.append((result, head.cost))
            }
            if !ready.isEmpty { state.writing += 1 }
            return ready
        }
        guard !ready.isEmpty else { return }
        // Encoded outside the lock: only this loop writes, so the order holds.
        var buffer = channel.allocator.buffer(capacity: ready.count * 32)
        for answer in ready {
            buffer.writeBytes(answer.result.line)
            budget.release(answer.cost)
        }
        channel.writeAndFlush(buffer).whenComplete { result in
            if case .failure = result {
                // Nothing more can be answered here: the channel goes too, so that the
                // reading ends and the client learns it.
                self.close()
                self.channel.close(promise: nil)
            }
            self.written()
        }
    }

    private func written() {
        let finishing = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.writing -= 1
            return Self.takeFinishing(&state)
        }
        finishing?.resume()
    }

    /// The channel closed (or a write failed): the answers not written are not.
    /// Their budget is given back, so that a reading that waits for room ends too.
    func close() {
        let (finishing, costs) = state.withLock { state -> (CheckedContinuation<Void, Never>?, [Int]) in
            state.closed = true
            let costs = state.lines.map(\.cost)
            state.lines.removeAll()
            defer { state.finishing = nil }
            return (state.finishing, costs)
        }
        for cost in costs { budget.release(cost) }
        finishing?.resume()
    }

    /// No more lines: returns once every line's answer is written (or the channel closed, or
    /// the waiting task is cancelled).
    func finish() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = state.withLock { state -> Bool in
                    state.finished = true
                    if state.closed || Task.isCancelled || (state.lines.isEmpty && state.writing == 0) { return true }
                    state.finishing = continuation
                    return false
                }
                if done { continuation.resume() }
            }
        } onCancel: {
            close()
        }
    }

    private static func takeFinishing(_ state: inout State) -> CheckedContinuation<Void, Never>? {
        guard state.finished, state.lines.isEmpty, state.writing == 0, let finishing = state.finishing else { return nil }
        state.finishing = nil
        return finishing
    }
}

/// Resumes a connection's answers when its channel is writable again, and ends them when it
/// closes.
final class SocketAnswersHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let answers: SocketAnswers

    init(_ answers: SocketAnswers) {
        self.answers = answers
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { answers.write() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        answers.close()
        context.fireChannelInactive()
    }
}
