import PushCore
import PushJSON
import Synchronization

/// The answer to one socket line, once known: accepted once durable, accepted before (a
/// resend), or refused with why.
public enum AckResult: Sendable, Equatable {
    case accepted(seq: Int64)
    /// The record's `seq` is at or below `watermark`, its source's watermark when it was
    /// checked: it was accepted before and is durable; it is not applied again.
    case duplicate(seq: Int64, watermark: Int64)
    case rejected(seq: Int64?, reason: String)

    /// `{"seq":N,"ok":true}`, `{"seq":N,"ok":true,"duplicate":true,"watermark":W}` or
    /// `{"seq":N,"ok":false,"error":"…"}` (SPEC §4).
    public var line: [UInt8] {
        var writer = JSONWriter(capacity: 64)
        switch self {
        case .accepted(let seq):
            writer.raw("{\"seq\":")
            writer.write(.int(seq))
            writer.raw(",\"ok\":true}")
        case .duplicate(let seq, let watermark):
            writer.raw("{\"seq\":")
            writer.write(.int(seq))
            writer.raw(",\"ok\":true,\"duplicate\":true,\"watermark\":")
            writer.write(.int(watermark))
            writer.raw("}")
        case .rejected(let seq, let reason):
            writer.raw("{\"seq\":")
            if let seq { writer.write(.int(seq)) } else { writer.raw("null") }
            writer.raw(",\"ok\":false,\"error\":")
            writer.writeString(reason)
            writer.raw("}")
        }
        writer.raw(UInt8(ascii: "\n"))
        return writer.bytes
    }
}

/// A one-shot answer: the pipeline completes it, the connection waits for it (``result()``) or
/// is called back (``whenComplete(_:)``).
public final class IngestAck: Sendable {
    private enum Waiter {
        case task(CheckedContinuation<AckResult, Never>)
        case callback(@Sendable (AckResult) -> Void)
    }

    private enum State {
        case pending([Waiter])
        case done(AckResult)
    }

    private let state = Mutex(State.pending([]))

    public init() {}

    /// Completes the answer (once; later calls are ignored).
    public func complete(_ result: AckResult) {
        let waiters = state.withLock { state -> [Waiter] in
            guard case .pending(let waiters) = state else { return [] }
            state = .done(result)
            return waiters
        }
        for waiter in waiters {
            switch waiter {
            case .task(let continuation): continuation.resume(returning: result)
            case .callback(let callback): callback(result)
            }
        }
    }

    /// The answer, if it is known already.
    public var completed: AckResult? {
        state.withLock { state in
            if case .done(let result) = state { return result }
            return nil
        }
    }

    /// Calls `callback` with the answer once it is known, on the thread that completes it (at
    /// once when it is known already): no task waits for it.
    public func whenComplete(_ callback: @escaping @Sendable (AckResult) -> Void) {
        let done = state.withLock { state -> AckResult? in
            switch state {
            case .done(let result):
                return result
            case .pending(var waiters):
                waiters.append(.callback(callback))
                state = .pending(waiters)
                return nil
            }
        }
        if let done { callback(done) }
    }

    /// The answer, once completed; when the waiting task is cancelled first (a hard stop), a
    /// refusal saying the line was not processed.
    public func result() async -> AckResult {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let done = state.withLock { state -> AckResult? in
                    switch state {
                    case .done(let result):
                        return result
                    case .pending(var waiters):
                        if Task.isCancelled { return Self.stopped }
                        waiters.append(.task(continuation))
                        state = .pending(waiters)
                        return nil
                    }
                }
                if let done { continuation.resume(returning: done) }
            }
        } onCancel: {
            complete(Self.stopped)
        }
    }

    static let stopped = AckResult.rejected(seq: nil, reason: "the service stopped before this line was processed; send it again")
}
