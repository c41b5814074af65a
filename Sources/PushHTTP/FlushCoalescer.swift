import NIOCore

/// Between TLS and HTTP/2: what one turn of the event loop writes leaves as one buffer, in one
/// TLS write and one system call.
///
/// - **Writes merged.** The HTTP/2 handler writes every frame as one or two buffers (a DATA
///   frame's header, then its payload), and TLS seals each buffer it is given as a record of
///   its own: a request was three records of a few dozen to a few hundred bytes, each with its
///   header, tag and encryption set-up, on both ends. The bytes written here are copied into
///   one buffer instead (BoringSSL cuts it into records of up to 16 KiB).
/// - **Flushes deferred.** A flush waits for the end of the loop's current turn, once: requests
///   started in the same turn (each stream flushes its head and body) go out together. A flush
///   waits at most for the tasks already queued on the loop.
///
/// Writes keep their order: everything written goes through the buffer, and anything that is
/// not bytes (a file region, never written by HTTP/2) goes after what the buffer holds. Each
/// write's promise completes with the merged write's.
final class FlushCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// Bytes written since the last write downstream, and their writers' promises.
    private var pending: ByteBuffer?
    private var promises: [EventLoopPromise<Void>] = []
    private var scheduled = false

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .byteBuffer(var bytes) = unwrapOutboundIn(data) else {
            writePending(context: context)
            context.write(data, promise: promise)
            return
        }
        if pending == nil {
            pending = context.channel.allocator.buffer(capacity: max(4096, bytes.readableBytes))
        }
        pending!.writeBuffer(&bytes)
        if let promise { promises.append(promise) }
    }

    func flush(context: ChannelHandlerContext) {
        guard !scheduled else { return }
        scheduled = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = loopBound.value
            handler.scheduled = false
            handler.writePending(context: context)
            context.flush()
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Written, not flushed: the channel fails it as it closes, as it would have.
        writePending(context: context)
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        writePending(context: context)
    }

    /// Hands the merged bytes on as one write (the buffer itself: it is allocated afresh for
    /// the next turn's, so nothing written is copied twice).
    private func writePending(context: ChannelHandlerContext) {
        guard let bytes = pending else { return }
        pending = nil
        let promise: EventLoopPromise<Void>?
        switch promises.count {
        case 0: promise = nil
        case 1: promise = promises[0]
        default:
            let merged = context.eventLoop.makePromise(of: Void.self)
            for each in promises { merged.futureResult.cascade(to: each) }
            promise = merged
        }
        promises.removeAll(keepingCapacity: true)
        context.write(wrapOutboundOut(.byteBuffer(bytes)), promise: promise)
    }
}
