import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP2
import NIOHTTPTypes

extension FakeProviders.Step {
    var isGoAway: Bool {
        if case .goAway = self { return true }
        return false
    }
}

/// Turns a response marked `x-fake-reset` into no answer at all: the connection is closed
/// (HTTP/1.1) or the stream reset (HTTP/2), as a provider's load balancer may do.
final class ResetHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart
    static let marker = HTTPField.Name("x-fake-reset")!
    /// Whether this handler sits on an HTTP/2 stream (whose parent is the connection).
    let http2: Bool
    var dropping = false

    init(http2: Bool) {
        self.http2 = http2
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .head(let head) = unwrapOutboundIn(data), let mark = head.headerFields[Self.marker] {
            dropping = true
            if mark == "goaway", http2, let connection = context.channel.parent,
                let stream = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)
            {
                let last = HTTP2StreamID(max(0, Int(stream) - 2))
                connection.writeAndFlush(HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: last, errorCode: .noError, opaqueData: nil)))
                    .whenComplete { _ in }
            }
            context.close(mode: .all, promise: nil)
        }
        guard !dropping else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(data, promise: promise)
    }
}
