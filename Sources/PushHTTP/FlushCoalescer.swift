import NIOCore

/// Defers a flush to the end of the event loop's current turn, once: requests started in the
/// same turn (each stream flushes its head and body) leave in one TLS write and one system call
/// instead of one each. A flush waits at most for the tasks already queued on the loop.
final class FlushCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    var scheduled = false

    func flush(context: ChannelHandlerContext) {
        guard !scheduled else { return }
        scheduled = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = loopBound.value
            handler.scheduled = false
            context.flush()
        }
    }
}
