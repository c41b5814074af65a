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

/// A one-shot answer: the pipeline completes it, the connection waits for it.
public final class IngestAck: Sendable {
    private enum State {
        case pending([CheckedContinuation<AckResult, Never>])
        case done(AckResult)
    }

    private let state = Mutex(State.pending([]))

    public init() {}

    /// Completes the answer (once; later calls are ignored).
    public func complete(_ result: AckResult) {
        let waiters = state.withLock { state -> [CheckedContinuation<AckResult, Never>] in
            guard case .pending(let waiters) = state else { return [] }
            state = .done(result)
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: result) }
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
                        waiters.append(continuation)
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
