import NIOCore
import NIOHPACK
import NIOHTTP2

/// Whoever waits for a request's answer: called once, on the connection's event loop, with the
/// answer or why there is none. A callback, not an `EventLoopPromise`: a promise, its future
/// and their callback lists cost ~7 % of a delivery's CPU (issue 35, tenth session).
struct AnswerWaiter: Sendable {
    let complete: @Sendable (Result<ProviderAnswer, HTTP2ConnectionError>) -> Void

    func succeed(_ answer: ProviderAnswer) { complete(.success(answer)) }
    func fail(_ error: HTTP2ConnectionError) { complete(.failure(error)) }
}

/// A request handed to a connection's event loop.
struct PendingRequest: Sendable {
    var headers: HPACKHeaders
    var body: [UInt8]
    var deadline: NIODeadline
    var waiter: AnswerWaiter
}

/// Runs a connection's streams as frames (after the HTTP/2 handler): what to do is the
/// ``HTTP2StreamStateMachine``'s; this handler writes the frames (each request's HEADERS and
/// DATA on a new stream id, resets, window updates), runs the one deadline timer, and
/// calls the waiters.
final class HTTP2ClientHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    let flags: ConnectionFlags
    var context: ChannelHandlerContext?
    var streams = HTTP2StreamStateMachine<AnswerWaiter>()
    var timer: Scheduled<Void>?

    init(flags: ConnectionFlags) {
        self.flags = flags
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // The connection's window from 65,535 bytes to 1 MiB (answers of many streams at once).
        let increment = HTTP2StreamStateMachine<Void>.connectionWindow - 65_535
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        closeAll()
        self.context = nil
    }

    /// Opens a stream for each request and writes them out in one flush.
    func start(_ requests: [PendingRequest]) {
        let active = context?.channel.isActive ?? false
        for request in requests {
            switch streams.open(request.waiter, deadline: request.deadline, active: active) {
            case .refuse(let waiter, let error):
                waiter.fail(error)
            case .open(let id, let armAt):
                guard let context else { continue }  // not active: refused above
                if let armAt { arm(armAt, context: context) }
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: request.headers, endStream: request.body.isEmpty)))), promise: nil)
                if !request.body.isEmpty {
                    let body = context.channel.allocator.buffer(bytes: request.body)
                    context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
                }
            }
        }
        if !streams.acceptsStreams { flags.open.store(false, ordering: .relaxed) }
        context?.flush()
    }

    /// Schedules the deadline timer for `deadline` (the machine asks only when it is earlier
    /// than the one armed).
    private func arm(_ deadline: NIODeadline, context: ChannelHandlerContext) {
        timer?.cancel()
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) { loopBound.value.expire() }
    }

    /// Fails and resets the streams whose deadline passed; arms the timer for the next one.
    func expire() {
        timer = nil
        let (expired, next) = streams.expire(now: .now())
        for (id, waiter) in expired {
            waiter.fail(HTTP2ConnectionError(kind: .timeout, description: "HTTP/2: no answer within the deadline"))
            if let context, context.channel.isActive {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
            }
        }
        if !expired.isEmpty { context?.flush() }
        if let next, let context { arm(next, context: context) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        let completion: HTTP2StreamStateMachine<AnswerWaiter>.Completion
        switch frame.payload {
        case .goAway(let last, _, _) where id == .rootStream:
            flags.open.store(false, ordering: .relaxed)
            for waiter in streams.goAway(lastStreamID: last) {
                waiter.fail(HTTP2ConnectionError.lost("GOAWAY, the stream was not processed", unprocessed: true))
            }
            return
        case .headers(let headers):
            completion = streams.headers(id, headers.headers, endStream: headers.endStream)
        case .data(let data):
            // Every DATA frame counts against the connection's window, even one of a stream
            // given up: the window is given back as it is read.
            if let increment = streams.received(bytes: data.data.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0)) {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
                context.flush()
            }
            guard case .byteBuffer(let bytes) = data.data else {
                completion = data.endStream ? streams.data(id, ByteBuffer(), endStream: true) : .none
                break
            }
            completion = streams.data(id, bytes, endStream: data.endStream)
        case .rstStream(let code):
            completion = streams.reset(id, code: code)
        default:
            return
        }
        complete(completion, context: context)
    }

    private func complete(_ completion: HTTP2StreamStateMachine<AnswerWaiter>.Completion, context: ChannelHandlerContext) {
        switch completion {
        case .none:
            break
        case .succeed(let waiter, let answer):
            waiter.succeed(answer)
        case .fail(let waiter, let error):
            waiter.fail(error)
        case .failAndReset(let waiter, let error, let id, let code):
            waiter.fail(error)
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(code))), promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent {
            complete(streams.closed(closed.streamID, reason: closed.reason), context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? NIOHTTP2Errors.StreamError {
            complete(streams.streamError(error.streamID, String(describing: error.baseError)), context: context)
            return
        }
        // A connection error: the HTTP/2 handler has sent GOAWAY and closes.
        flags.open.store(false, ordering: .relaxed)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeAll()
        context.fireChannelInactive()
    }

    private func closeAll() {
        flags.open.store(false, ordering: .relaxed)
        timer?.cancel()
        timer = nil
        for waiter in streams.closeAll() {
            waiter.fail(HTTP2ConnectionError.lost("the connection closed before the answer"))
        }
    }
}
