import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import PushCore

/// Limits on a client's connection, so that an idle or slow client cannot hold one forever.
public struct ConnectionLimits: Sendable {
    /// A request's head must arrive complete within this time, counted from the connection's
    /// start or from the end of the previous response: it bounds idle keep-alive connections
    /// and slow senders of headers (slowloris).
    public var headTimeout: TimeAmount
    /// A request must be answered within this time of its head: it bounds slow senders of
    /// bodies. The connection is closed when it expires.
    public var requestTimeout: TimeAmount
    /// Largest request head (request line and headers), in bytes.
    public var maxHeadBytes: Int

    public static let standard = ConnectionLimits(headTimeout: .seconds(30), requestTimeout: .seconds(60), maxHeadBytes: 80 * 1024)

    public init(headTimeout: TimeAmount, requestTimeout: TimeAmount, maxHeadBytes: Int) {
        self.headTimeout = headTimeout
        self.requestTimeout = requestTimeout
        self.maxHeadBytes = maxHeadBytes
    }
}

/// Sits between the HTTP/1 codec and Hummingbird on every connection:
///
/// - a request that is not valid HTTP/1.1 (a head over the limit, an unknown method, a broken
///   request line) is answered with the JSON error body of SPEC §5, where Hummingbird would
///   answer an empty 400, and the connection is closed;
/// - the deadlines of ``ConnectionLimits``: a head not received in time is answered 408 (JSON)
///   and the connection closed; a request not answered in time closes the connection.
///
/// An error inside a request's body (a malformed chunk) reaches the handler reading the body,
/// which answers 400 through the error middleware.
final class HTTPGuardHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let limits: ConnectionLimits
    /// A request's head was read and its response has not ended.
    private var inFlight = false
    /// The connection is being closed by this handler; nothing more is written.
    private var closing = false
    private var deadline: Scheduled<Void>?

    init(limits: ConnectionLimits) {
        self.limits = limits
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { waitForHead(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        waitForHead(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) {
            inFlight = true
            schedule(context, after: limits.requestTimeout) { handler, context in
                // The response may be under way: close rather than write a second one.
                handler.closing = true
                context.close(promise: nil)
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            inFlight = false
            waitForHead(context)
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? HTTPParserError, !inFlight, !closing {
            let (status, code, message) = Self.describe(error, limits: limits)
            respondAndClose(context, status: status, code: code, message: message)
            return
        }
        context.fireErrorCaught(error)
    }

    // MARK: - Helpers

    private func waitForHead(_ context: ChannelHandlerContext) {
        schedule(context, after: limits.headTimeout) { handler, context in
            handler.respondAndClose(
                context, status: .requestTimeout, code: "request_timeout",
                message: "no complete request arrived within \(Self.seconds(handler.limits.headTimeout)); the connection is closed")
        }
    }

    private func schedule(
        _ context: ChannelHandlerContext, after delay: TimeAmount, _ action: @escaping (HTTPGuardHandler, ChannelHandlerContext) -> Void
    ) {
        deadline?.cancel()
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: delay) {
            let (handler, context) = loopBound.value
            handler.deadline = nil
            action(handler, context)
        }
    }

    private func respondAndClose(_ context: ChannelHandlerContext, status: HTTPResponse.Status, code: String, message: String) {
        guard !closing else { return }
        closing = true
        deadline?.cancel()
        deadline = nil
        var body = JSONWriter(capacity: 128)
        body.raw("{\"error\":")
        body.writeString(code)
        body.raw(",\"message\":")
        body.writeString(message)
        body.raw("}")
        let bytes = body.bytes
        let head = HTTPResponse(
            status: status,
            headerFields: [.contentType: "application/json", .contentLength: "\(bytes.count)", .connection: "close"])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: bytes))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }

    static func describe(_ error: HTTPParserError, limits: ConnectionLimits) -> (HTTPResponse.Status, String, String) {
        switch error {
        case .headerOverflow:
            return (
                .requestHeaderFieldsTooLarge, "request_header_fields_too_large",
                "the request line and headers are larger than \(limits.maxHeadBytes) bytes"
            )
        case .invalidMethod:
            return (.badRequest, "bad_request", "the request line is malformed or names a method HTTP does not define")
        default:
            return (.badRequest, "bad_request", "the request is not valid HTTP/1.1 (\(error))")
        }
    }

    static func seconds(_ amount: TimeAmount) -> String {
        let milliseconds = amount.nanoseconds / 1_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}

extension SubscriptionAPI {
    /// The HTTP/1.1 server the API runs on: Hummingbird's, with ``HTTPGuardHandler`` on every
    /// connection.
    public static func server(limits: ConnectionLimits = .standard) -> HTTPServerBuilder {
        var configuration = HTTP1Channel.Configuration(
            additionalChannelHandlers: [HTTPGuardHandler(limits: limits)],
            httpDecoderConfiguration: .init(
                maxHeaderFieldSize: limits.maxHeadBytes, maxHeaderListSize: limits.maxHeadBytes, maxHeaderFieldCount: 256))
        configuration.idleTimeout = nil  // the guard's head deadline covers idle connections
        return .http1(configuration: configuration)
    }
}
