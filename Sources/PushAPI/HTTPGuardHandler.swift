import HTTPTypes
import Synchronization
import Hummingbird
import HummingbirdCore
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import PushCore
import PushJSON

#if canImport(Glibc)
import Glibc
#endif

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
    /// Connections open at once, at most (`http.maxConnections`): one more is answered 503 and
    /// closed at once, before anything of it is read, so that slow clients cannot take every
    /// file descriptor of the process (issue 33: 600 slow clients held 667). The service sets
    /// it from `http.maxConnections`; unbounded here by default.
    public var maxConnections: Int

    public static let standard = ConnectionLimits(headTimeout: .seconds(30), requestTimeout: .seconds(60), maxHeadBytes: 80 * 1024)

    public init(headTimeout: TimeAmount, requestTimeout: TimeAmount, maxHeadBytes: Int, maxConnections: Int = 1_000_000) {
        self.headTimeout = headTimeout
        self.requestTimeout = requestTimeout
        self.maxHeadBytes = maxHeadBytes
        self.maxConnections = max(1, maxConnections)
    }
}

/// The connections a server has open, against ``ConnectionLimits/maxConnections``: shared by
/// every connection's ``ConnectionCapHandler``.
public final class ConnectionCount: Sendable {
    let maximum: Int
    let open = Atomic<Int>(0)
    let refusedTotal = Atomic<Int>(0)
    let onRefused: @Sendable () -> Void

    /// `onRefused`: told of each connection refused (a metric).
    public init(maximum: Int, onRefused: @escaping @Sendable () -> Void = {}) {
        self.maximum = max(1, maximum)
        self.onRefused = onRefused
    }

    /// Connections open now, and refused so far.
    public var current: (open: Int, refused: Int) { (open.load(ordering: .relaxed), refusedTotal.load(ordering: .relaxed)) }

    /// A connection opens: whether it is within the bound (it counts either way until it closes).
    func opened() -> Bool {
        open.wrappingAdd(1, ordering: .relaxed).newValue <= maximum
    }

    func closed() {
        open.wrappingSubtract(1, ordering: .relaxed)
    }

    func refused() {
        refusedTotal.wrappingAdd(1, ordering: .relaxed)
        onRefused()
    }
}

/// First on every connection: counts it, and past ``ConnectionLimits/maxConnections`` answers
/// 503 `{"error":"unavailable",…}` with `Retry-After: 1` and closes it without reading a byte
/// of it (a refusal costs the server one write).
final class ConnectionCapHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let count: ConnectionCount
    private var counted = false
    private var refusing = false

    init(count: ConnectionCount) {
        self.count = count
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context)
        if !refusing { context.fireChannelActive() }
    }

    func admit(_ context: ChannelHandlerContext) {
        guard !counted else { return }
        counted = true
        guard !count.opened() else { return }
        refusing = true
        count.refused()
        let body = HTTPGuardHandler.errorBody(
            code: "unavailable", message: "the server holds \(count.maximum) connections (http.maxConnections); try again in a moment")
        let head = HTTPResponse(
            status: .serviceUnavailable,
            headerFields: [.contentType: "application/json", .contentLength: "\(body.count)", .connection: "close", .retryAfter: "1"])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if counted {
            counted = false
            count.closed()
        }
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refusing else { return }
        context.fireChannelRead(data)
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
    /// The last error of the HTTP/1 codec: what an answer to it names.
    private var lastParserError: HTTPParserError?
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
        guard !closing else { return }
        if case .head(let head) = unwrapInboundIn(data) {
            if head.method == .connect {
                // After a CONNECT head the codec takes the rest for a tunnel's bytes and answers
                // carry no body: no HTTP exchange can follow, so the connection is closed.
                closing = true
                context.close(promise: nil)
                return
            }
            inFlight = true
            schedule(context, after: limits.requestTimeout) { handler, context in
                // The response may be under way: close rather than write a second one.
                handler.closing = true
                Self.abort(context)
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head) where Self.isBareParseErrorAnswer(head):
            // Hummingbird's own answer to a request it could not parse (an empty 400): give it
            // the JSON body of SPEC §5, naming what was wrong.
            let (status, code, message) = Self.describe(lastParserError ?? .unknown, limits: limits)
            let body = Self.errorBody(code: code, message: message)
            let rewritten = HTTPResponse(
                status: status, headerFields: [.contentType: "application/json", .contentLength: "\(body.count)", .connection: "close"])
            context.write(wrapOutboundOut(.head(rewritten)), promise: nil)
            context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: promise)
            closing = true
            return
        case .head(let head) where head.headerFields[.contentType] == "text/event-stream":
            // An event stream (`GET /ops/v1/events`) is answered for as long as its reader
            // stays: the request's deadline no longer applies once its answer began. Its
            // comments every 15 s notice a reader gone.
            deadline?.cancel()
            deadline = nil
        case .end:
            inFlight = false
            if !closing { waitForHead(context) }
        default:
            break
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? HTTPParserError {
            lastParserError = error
            if !inFlight && !closing {
                let (status, code, message) = Self.describe(error, limits: limits)
                respondAndClose(context, status: status, code: code, message: message)
                return
            }
        }
        context.fireErrorCaught(error)
    }

    /// The answer Hummingbird writes itself when the codec fails: 400, no body, connection closed.
    static func isBareParseErrorAnswer(_ head: HTTPResponse) -> Bool {
        head.status == .badRequest && head.headerFields[.contentLength] == "0" && head.headerFields[.connection] == "close"
    }

    static func errorBody(code: String, message: String) -> [UInt8] {
        var body = JSONWriter(capacity: 128)
        body.raw("{\"error\":")
        body.writeString(code)
        body.raw(",\"message\":")
        body.writeString(message)
        body.raw("}")
        return body.bytes
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
        // The handler, its context and the action live on the channel's event loop, where the
        // task runs.
        let loopBound = NIOLoopBound((self, context, action), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: delay) {
            let (handler, context, action) = loopBound.value
            handler.deadline = nil
            action(handler, context)
        }
    }

    /// Answers with a JSON error and closes: once the answer is flushed, or after a second in
    /// any case (a client that does not read would otherwise keep the flush, and the
    /// connection, pending for ever).
    private func respondAndClose(_ context: ChannelHandlerContext, status: HTTPResponse.Status, code: String, message: String) {
        guard !closing else { return }
        closing = true
        let bytes = Self.errorBody(code: code, message: message)
        let head = HTTPResponse(
            status: status,
            headerFields: [.contentType: "application/json", .contentLength: "\(bytes.count)", .connection: "close"])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: bytes))), promise: nil)
        // A client with answers piling up unread gets a reset, not a graceful close after which
        // the kernel would go on trickling those answers to it.
        let backlog = inFlight || !context.channel.isWritable
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { result in
            if backlog || (try? result.get()) == nil {
                Self.abort(loopBound.value)
            } else {
                loopBound.value.close(promise: nil)
            }
        }
        schedule(context, after: .seconds(1)) { _, context in Self.abort(context) }
    }

    /// Closes at once, discarding what the kernel still holds for the client (a reset): a
    /// client that does not read would otherwise keep megabytes of answers queued for minutes.
    static func abort(_ context: ChannelHandlerContext) {
        let channel = context.channel
        guard let provider = channel as? any SocketOptionProvider else {
            channel.close(promise: nil)
            return
        }
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
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
    /// `connections`: the count ``ConnectionLimits/maxConnections`` holds against (one per
    /// server; a fresh one when none is given).
    public static func server(limits: ConnectionLimits = .standard, connections: ConnectionCount? = nil) -> HTTPServerBuilder {
        let count = connections ?? ConnectionCount(maximum: limits.maxConnections)
        var configuration = HTTP1Channel.Configuration(
            additionalChannelHandlers: [ConnectionCapHandler(count: count), HTTPGuardHandler(limits: limits)],
            httpDecoderConfiguration: .init(
                maxHeaderFieldSize: limits.maxHeadBytes, maxHeaderListSize: limits.maxHeadBytes, maxHeaderFieldCount: 256))
        configuration.idleTimeout = nil  // the guard's head deadline covers idle connections
        return .http1(configuration: configuration)
    }
}
