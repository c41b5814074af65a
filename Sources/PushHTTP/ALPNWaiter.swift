import NIOCore
import NIOTLS

/// Waits for the TLS handshake and says which protocol ALPN agreed on; holds what the server
/// sends from then on until the HTTP/2 handler is in place, and hands it over as it leaves.
///
/// The connection is configured in a callback of the connect future, which may run after the
/// handshake completed and after the server's first frames (its SETTINGS, sent with or right
/// after its TLS Finished) were decrypted: passed on then, they reached the end of the
/// pipeline and were dropped, and the HTTP/2 handler closed the connection on the SETTINGS
/// acknowledgement that followed (seen on about a third of new connections to nginx and
/// nghttpd: their first requests failed as lost in transit and were resent).
final class ALPNWaiter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    let promise: EventLoopPromise<String?>
    let timeout: TimeAmount
    var timer: Scheduled<Void>?
    /// Reads since the handshake, in order, for the handler that follows.
    var held: [NIOAny] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        held.append(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {}

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        let reads = held
        held.removeAll()
        for data in reads { context.fireChannelRead(data) }
        if !reads.isEmpty { context.fireChannelReadComplete() }
        context.leavePipeline(removalToken: removalToken)
    }

    init(promise: EventLoopPromise<String?>, timeout: TimeAmount) {
        self.promise = promise
        self.timeout = timeout
    }

    func channelActive(context: ChannelHandlerContext) {
        let promise = self.promise
        let timeout = self.timeout
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: timeout) {
            promise.fail(HTTP2ConnectionError(kind: .connect, description: "the TLS handshake took longer than \(timeout)"))
            channel.close(promise: nil)
        }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event {
            timer?.cancel()
            promise.succeed(negotiated)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        timer?.cancel()
        promise.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        promise.fail(HTTP2ConnectionError(kind: .connect, description: "the connection closed during the TLS handshake"))
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        // Removed once the handshake is done (a no-op then), or with a channel that never
        // became active (a refused connection).
        promise.fail(HTTP2ConnectionError(kind: .connect, description: "the connection closed before the TLS handshake"))
    }
}
