import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import PushCore
import Synchronization

/// HTTP/2 over TLS straight on swift-nio-http2: what FCM, HMS and APNs speak.
///
/// Per origin (host and port), ``Configuration/connectionsPerOrigin`` connections, each
/// carrying many requests at once as streams; a request takes the connection with the fewest
/// streams open. A request is two frames written on the connection's event loop (no channel per
/// stream), requests handed over together leave in one write, and the answer completes a
/// promise.
///
/// - A connection that receives GOAWAY takes no new stream and is replaced; its streams above
///   the last one the server processed fail as lost in transit (``TransportError/lostInTransit``)
///   and are resent at once by ``SenderContext``; so does a stream reset with `REFUSED_STREAM`
///   (never processed) or any reset or close before the answer.
/// - Every request has its deadline (the stream is reset when it passes); a request that found
///   no connection within it fails the same way.
/// - `http://` URLs, and origins whose TLS handshake does not agree on `h2` (ALPN), go to
///   `fallback` (HTTP/1.1: webhooks, plain-text fakes).
public final class HTTP2Transport: HTTPTransport, Sendable {
    public struct Configuration: Sendable {
        /// Connections per origin. Default 4.
        public var connectionsPerOrigin: Int = 4
        /// How long a TCP connect and TLS handshake may take. Default 10 s.
        public var connectTimeout: Duration = .seconds(10)
        /// PEM certificates to trust in addition to the system's.
        public var caFile: String?
        /// Connect only to public addresses (``AddressClass/isPublic(_:)``): the host is
        /// resolved first and the connection made to a public address it resolves to, else
        /// refused. For URLs that come from outside (Web Push endpoints). Default false.
        public var publicAddressesOnly: Bool = false

        public init(connectionsPerOrigin: Int = 4, connectTimeout: Duration = .seconds(10), caFile: String? = nil, publicAddressesOnly: Bool = false) {
            self.connectionsPerOrigin = connectionsPerOrigin
            self.connectTimeout = connectTimeout
            self.caFile = caFile
            self.publicAddressesOnly = publicAddressesOnly
        }
    }

    let configuration: Configuration
    let group: any EventLoopGroup
    let tls: NIOSSLContext
    let fallback: any HTTPTransport
    let pools = Mutex<[RequestTarget.Origin: OriginPool]>([:])
    /// Origins that did not agree on `h2`: sent through `fallback`.
    let http1Origins = Mutex<Set<RequestTarget.Origin>>([])
    /// Parsed URLs (a sender uses a handful).
    let targets = Mutex<[String: RequestTarget]>([:])
    let closed = Atomic<Bool>(false)
    let logger: Logger

    /// Answers longer than this are cut (a hostile or broken endpoint cannot exhaust memory).
    public static let maximumAnswerBytes = 1 << 20
    /// The largest header block accepted from a server.
    static let maximumHeaderListSize = 16 << 10

    public init(
        configuration: Configuration = Configuration(), fallback: any HTTPTransport,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger = Logger(label: "pushdispatch.http2")
    ) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        // Both offered: a server without HTTP/2 refuses a handshake that offers h2 alone
        // (no_application_protocol); one that picks http/1.1 is sent through the fallback.
        tls.applicationProtocols = ["h2", "http/1.1"]
        if let caFile = configuration.caFile {
            let certificates = try NIOSSLCertificate.fromPEMFile(caFile)
            guard !certificates.isEmpty else { throw TransportError("delivery.caFile \(caFile) holds no PEM certificate") }
            tls.additionalTrustRoots = [.certificates(certificates)]
        }
        self.tls = try NIOSSLContext(configuration: tls)
        self.configuration = configuration
        self.group = eventLoopGroup
        self.fallback = fallback
        self.logger = logger
    }

    public func send(_ request: OutgoingRequest, timeout: Duration) async throws(TransportError) -> ProviderAnswer {
        guard let target = target(request.url) else { throw TransportError("the URL \(request.url.prefix(200)) is not an absolute http(s) URL") }
        if !target.secure || http1Origins.withLock({ $0.contains(target.origin) }) {
            try await checkPublic(target)
            return try await fallback.send(request, timeout: timeout)
        }
        guard !closed.load(ordering: .relaxed) else { throw TransportError("the transport is shut down") }
        let deadline = Self.deadline(after: timeout)
        do {
            let connection = try await pool(for: target).connection(deadline: deadline)
            return try await connection.exchange(request, target: target, deadline: deadline)
        } catch let error as HTTP2ConnectionError where error.kind == .notHTTP2 {
            return try await sendOverHTTP1(request, target: target, timeout: timeout)
        } catch {
            throw Self.transportError(error)
        }
    }

    /// Starts `request` on an HTTP/2 connection with callbacks only (no task waits for it):
    /// the answer or the error reaches `completion` on the connection's event loop. False for
    /// what goes elsewhere (`http://`, an origin without HTTP/2, a closed transport): use
    /// ``send(_:timeout:)``.
    public func start(_ request: OutgoingRequest, timeout: Duration, completion: @escaping @Sendable (Result<ProviderAnswer, TransportError>) -> Void) -> Bool {
        guard let target = target(request.url), target.secure, !closed.load(ordering: .relaxed),
            !http1Origins.withLock({ $0.contains(target.origin) })
        else { return false }
        let deadline = Self.deadline(after: timeout)
        pool(for: target).connectionFuture(deadline: deadline)
            .flatMap { connection in connection.exchangeFuture(request, target: target, deadline: deadline) }
            .whenComplete { result in
                switch result {
                case .success(let answer):
                    completion(.success(answer))
                case .failure(let error as HTTP2ConnectionError) where error.kind == .notHTTP2:
                    Task {
                        do throws(TransportError) {
                            completion(.success(try await self.sendOverHTTP1(request, target: target, timeout: timeout)))
                        } catch {
                            completion(.failure(error))
                        }
                    }
                case .failure(let error):
                    completion(.failure(Self.transportError(error)))
                }
            }
        return true
    }

    /// An origin found not to agree on `h2`: its requests go over HTTP/1.1 from here on.
    func sendOverHTTP1(_ request: OutgoingRequest, target: RequestTarget, timeout: Duration) async throws(TransportError) -> ProviderAnswer {
        http1Origins.withLock { _ = $0.insert(target.origin) }
        logger.notice("\(target.origin.host):\(target.origin.port) does not speak HTTP/2 (ALPN): its requests go over HTTP/1.1")
        try await checkPublic(target)
        return try await fallback.send(request, timeout: timeout)
    }

    /// `timeout` from now, as NIO counts it.
    static func deadline(after timeout: Duration) -> NIODeadline {
        NIODeadline.now() + .nanoseconds(Int64(clamping: timeout.wholeMilliseconds) &* 1_000_000)
    }

    /// What a request's failure is to its sender: a ``TransportError`` as it is, anything else
    /// described, lost in transit or not, processed or not.
    static func transportError(_ error: any Error) -> TransportError {
        if let error = error as? TransportError { return error }
        return TransportError(
            describe(error), lostInTransit: isLostInTransit(error), unprocessed: (error as? HTTP2ConnectionError)?.unprocessed ?? false)
    }

    /// The connections to `target`'s origin, made on first use.
    func pool(for target: RequestTarget) -> OriginPool {
        pools.withLock { pools in
            if let pool = pools[target.origin] { return pool }
            let pool = OriginPool(target: target, transport: self)
            pools[target.origin] = pool
            return pool
        }
    }

    /// With ``Configuration/publicAddressesOnly``, refuses a target that resolves to no public
    /// address before it goes to the fallback. (The fallback resolves the name again: between
    /// the two, a name could change its answer. Only origins without HTTP/2 take this path; the
    /// HTTP/2 path connects to the address it checked.)
    func checkPublic(_ target: RequestTarget) async throws(TransportError) {
        guard configuration.publicAddressesOnly else { return }
        do {
            _ = try await PublicAddressResolver.resolve(host: target.host, port: target.port)
        } catch {
            throw TransportError("\(error)")
        }
    }

    func target(_ url: String) -> RequestTarget? {
        if let known = targets.withLock({ $0[url] }) { return known }
        guard let parsed = RequestTarget(url) else { return nil }
        targets.withLock { targets in
            if targets.count >= 1_024 { targets.removeAll(keepingCapacity: true) }
            targets[url] = parsed
        }
        return parsed
    }

    /// Closes every connection (requests in flight fail), then the fallback.
    public func shutdown() async throws {
        closed.store(true, ordering: .relaxed)
        let all = pools.withLock { pools in
            defer { pools.removeAll() }
            return Array(pools.values)
        }
        for pool in all { await pool.close() }
        if let fallback = fallback as? AsyncHTTPTransport { try await fallback.shutdown() }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as HTTP2ConnectionError: return error.description
        case let error as PublicAddressResolver.Refused: return error.description
        case let error as NIOHTTP2Errors.StreamClosed: return "HTTP/2: the stream was closed (\(error.errorCode))"
        case let error as NIOSSLError: return "TLS: \(error)"
        case let error as IOError: return "connection: \(error.description)"
        default: return "transport: \(String(describing: error).prefix(200))"
        }
    }

    /// Whether `error` means the connection or stream went away under the request: resent at
    /// once. A refused connection or a failed handshake is not (the back-off waits).
    static func isLostInTransit(_ error: any Error) -> Bool {
        switch error {
        case let error as HTTP2ConnectionError: return error.kind == .lost
        case is NIOHTTP2Errors.StreamClosed, is NIOHTTP2Errors.CreatedStreamAfterGoaway, is NIOHTTP2Errors.IOOnClosedConnection: return true
        case let error as ChannelError: return error == .ioOnClosedChannel || error == .eof || error == .outputClosed || error == .alreadyClosed
        case let error as IOError: return error.errnoCode == ECONNRESET || error.errnoCode == EPIPE
        case let error as NIOSSLError: return error == .uncleanShutdown
        default: return false
        }
    }
}

/// Why a connection could not carry a request.
struct HTTP2ConnectionError: Error, CustomStringConvertible {
    enum Kind { case notHTTP2, connect, lost, timeout }
    var kind: Kind
    var description: String
    /// Lost before the server processed it (GOAWAY above the last stream it processed,
    /// `REFUSED_STREAM`, or never written): resending it cannot make a duplicate.
    var unprocessed = false
}

/// The connections to one origin.
final class OriginPool: Sendable {
    enum Slot {
        case empty
        case connecting(EventLoopFuture<HTTP2Connection>)
        case ready(HTTP2Connection)
    }

    let target: RequestTarget
    let transport: HTTP2Transport
    let slots: Mutex<[Slot]>

    init(target: RequestTarget, transport: HTTP2Transport) {
        self.target = target
        self.transport = transport
        slots = Mutex(Array(repeating: .empty, count: max(1, transport.configuration.connectionsPerOrigin)))
    }

    /// The usable connection with the fewest streams open; a new one in an empty slot while
    /// some slot is empty (so that a burst spreads over every connection).
    func connection(deadline: NIODeadline) async throws -> HTTP2Connection {
        try await connectionFuture(deadline: deadline).get()
    }

    /// ``connection(deadline:)`` as a future.
    func connectionFuture(deadline: NIODeadline) -> EventLoopFuture<HTTP2Connection> {
        slots.withLock { slots in
            var best: (index: Int, load: Int)?
            var emptySlot: Int?
            var pending: EventLoopFuture<HTTP2Connection>?
            for index in slots.indices {
                switch slots[index] {
                case .ready(let connection) where connection.usable:
                    let load = connection.load
                    if best == nil || load < best!.load { best = (index, load) }
                case .ready:
                    slots[index] = .empty
                    if emptySlot == nil { emptySlot = index }
                case .empty:
                    if emptySlot == nil { emptySlot = index }
                case .connecting(let future):
                    if pending == nil { pending = future }
                }
            }
            if let emptySlot, best == nil || best!.load > 0 {
                let future = connect(slot: emptySlot, deadline: deadline)
                slots[emptySlot] = .connecting(future)
                return future
            }
            if let best, case .ready(let connection) = slots[best.index] {
                return connection.channel.eventLoop.makeSucceededFuture(connection)
            }
            return pending!
        }
    }

    private func connect(slot: Int, deadline: NIODeadline) -> EventLoopFuture<HTTP2Connection> {
        let future = HTTP2Connection.connect(target: target, transport: transport)
        future.whenComplete { result in
            self.slots.withLock { slots in
                guard slot < slots.count, case .connecting = slots[slot] else { return }
                switch result {
                case .success(let connection): slots[slot] = .ready(connection)
                case .failure: slots[slot] = .empty
                }
            }
        }
        return future
    }

    func close() async {
        let connections: [HTTP2Connection] = slots.withLock { slots in
            defer { slots = slots.map { _ in .empty } }
            return slots.compactMap { if case .ready(let connection) = $0 { connection } else { nil } }
        }
        for connection in connections { try? await connection.channel.close() }
    }
}

/// One HTTP/2 connection: its channel, the handler that runs its streams, whether it takes
/// new ones.
///
/// Streams are frames with a stream id on the connection, not child channels: a request is a
/// HEADERS and a DATA frame written by ``HTTP2ClientHandler``, its answer the frames read back
/// for that id. Requests handed over from other threads wait in a queue that one task on the
/// event loop drains, so a burst costs one wake-up of the loop and one write, not one each.
final class HTTP2Connection: Sendable {
    let channel: any Channel
    let handler: NIOLoopBound<HTTP2ClientHandler>
    let flags: ConnectionFlags
    /// Requests handed over and not yet started on the loop; whether a drain is scheduled.
    let queue = Mutex<(requests: [PendingRequest], scheduled: Bool)>(([], false))

    init(channel: any Channel, handler: HTTP2ClientHandler, flags: ConnectionFlags) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        self.flags = flags
    }

    /// Streams open (requests in flight).
    var load: Int { flags.streams.load(ordering: .relaxed) }
    var usable: Bool { flags.open.load(ordering: .relaxed) && channel.isActive }

    /// TCP, TLS with ALPN `h2`, then HTTP/2.
    static func connect(target: RequestTarget, transport: HTTP2Transport) -> EventLoopFuture<HTTP2Connection> {
        let tls = transport.tls
        let serverName = target.hostIsAddress ? nil : target.host
        let timeout = TimeAmount.milliseconds(Int64(clamping: transport.configuration.connectTimeout.wholeMilliseconds))
        let group = transport.group
        @Sendable func bootstrap() -> ClientBootstrap {
            ClientBootstrap(group: group)
                .connectTimeout(timeout)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handshake = ALPNWaiter(promise: channel.eventLoop.makePromise(), timeout: timeout)
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverName))
                        try channel.pipeline.syncOperations.addHandler(handshake)
                    }
                }
        }
        let connected: EventLoopFuture<any Channel>
        if transport.configuration.publicAddressesOnly {
            // Connected to the address that was checked, not to the name resolved again.
            connected = PublicAddressResolver.resolve(host: target.host, port: target.port, eventLoop: group.next()).flatMap { address in
                bootstrap().connect(to: address)
            }
        } else {
            connected = bootstrap().connect(host: target.host, port: target.port)
        }
        return connected.flatMap { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.handler(type: ALPNWaiter.self).promise.futureResult }
                .flatMap { $0 }
                .flatMapThrowing { negotiated -> Void in
                    guard negotiated == "h2" else {
                        channel.close(promise: nil)
                        throw HTTP2ConnectionError(
                            kind: .notHTTP2, description: "\(target.host):\(target.port) did not agree on HTTP/2 in TLS (ALPN \(negotiated ?? "none"))")
                    }
                }
                .flatMapThrowing { () -> HTTP2Connection in
                    let sync = channel.pipeline.syncOperations
                    var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
                    connectionConfiguration.initialSettings = [
                        HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
                        HTTP2Setting(parameter: .enablePush, value: 0),
                        HTTP2Setting(parameter: .maxHeaderListSize, value: HTTP2Transport.maximumHeaderListSize),
                        // Answers are small: no stream needs a window update.
                        HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                    ]
                    // A server that answers before it reads a body resets the stream after its
                    // answer (nginx: RST_STREAM NO_ERROR), once per request: the default
                    // limits (200 resets or stream errors, or 200 glitches, per 30 s) would
                    // close a busy connection within a second. A server's resets cost it more
                    // than us; these bounds stay far above any provider's rate.
                    connectionConfiguration.maximumConnectionGlitches = 1_000_000
                    var streamConfiguration = NIOHTTP2Handler.StreamConfiguration()
                    streamConfiguration.streamResetFrameRateLimit.maximumCount = 1_000_000
                    streamConfiguration.streamResetFrameRateLimit.windowLength = .seconds(10)
                    streamConfiguration.streamErrorRateLimit.maximumCount = 1_000_000
                    streamConfiguration.streamErrorRateLimit.windowLength = .seconds(10)
                    // Between TLS and HTTP/2: the flushes of one turn of the event loop become
                    // one TLS write and one system call.
                    try sync.addHandler(FlushCoalescer())
                    try sync.addHandler(
                        NIOHTTP2Handler(mode: .client, connectionConfiguration: connectionConfiguration, streamConfiguration: streamConfiguration))
                    let flags = ConnectionFlags()
                    let client = HTTP2ClientHandler(flags: flags, authority: target.authority)
                    try sync.addHandler(client)
                    // Last: what the server sent since the handshake (its SETTINGS) is held by
                    // the waiter and handed to the HTTP/2 handler as the waiter leaves.
                    _ = try sync.removeHandler(sync.handler(type: ALPNWaiter.self))
                    return HTTP2Connection(channel: channel, handler: client, flags: flags)
                }
                .flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
        }.flatMapErrorThrowing { error in
            if error is HTTP2ConnectionError { throw error }
            throw HTTP2ConnectionError(
                kind: .connect, description: "cannot connect to \(target.host):\(target.port): \(HTTP2Transport.describe(error))")
        }
    }

    /// One request on a new stream: the answer, or an error.
    func exchange(_ request: OutgoingRequest, target: RequestTarget, deadline: NIODeadline) async throws -> ProviderAnswer {
        try await exchangeFuture(request, target: target, deadline: deadline).get()
    }

    /// ``exchange(_:target:deadline:)`` as a future, completed on the connection's event loop.
    func exchangeFuture(_ request: OutgoingRequest, target: RequestTarget, deadline: NIODeadline) -> EventLoopFuture<ProviderAnswer> {
        var headers = HPACKHeaders()
        headers.reserveCapacity(request.headers.count + 5)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: target.authority)
        headers.add(name: ":path", value: target.path)
        for (name, value) in request.headers {
            let lowered = name.lowercased()
            // Connection-specific fields are not HTTP/2's (RFC 9113 §8.2.2).
            if ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host", "content-length"].contains(lowered) { continue }
            headers.add(name: lowered, value: value)
        }
        headers.add(name: "content-length", value: String(request.body.count))
        let promise = channel.eventLoop.makePromise(of: ProviderAnswer.self)
        let pending = PendingRequest(headers: headers, body: request.body, deadline: deadline, promise: promise)
        let schedule = queue.withLock { queue -> Bool in
            queue.requests.append(pending)
            defer { queue.scheduled = true }
            return !queue.scheduled
        }
        if schedule {
            let handler = self.handler
            channel.eventLoop.execute {
                let requests = self.queue.withLock { queue in
                    defer {
                        queue.requests.removeAll(keepingCapacity: true)
                        queue.scheduled = false
                    }
                    return queue.requests
                }
                handler.value.start(requests)
            }
        }
        flags.streams.wrappingAdd(1, ordering: .relaxed)
        let flags = self.flags
        promise.futureResult.whenComplete { _ in flags.streams.wrappingSubtract(1, ordering: .relaxed) }
        return promise.futureResult
    }
}

/// What a connection's users read from any thread.
final class ConnectionFlags: Sendable {
    /// Streams open (requests in flight).
    let streams = Atomic<Int>(0)
    /// False once GOAWAY came, the stream ids ran out, or the connection closed.
    let open = Atomic<Bool>(true)
}

/// A request handed to a connection's event loop.
struct PendingRequest: Sendable {
    var headers: HPACKHeaders
    var body: [UInt8]
    var deadline: NIODeadline
    var promise: EventLoopPromise<ProviderAnswer>
}

/// Runs a connection's streams as frames (after the HTTP/2 handler): writes each request's
/// HEADERS and DATA with a new stream id, reads each answer's frames back by id, and fails what
/// is lost (a reset, GOAWAY past the last id processed, the connection closing) or late (its
/// deadline: the stream is reset).
final class HTTP2ClientHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    struct Exchange {
        var promise: EventLoopPromise<ProviderAnswer>
        var deadline: NIODeadline
        var status: Int?
        var retryAfter: String?
        var body: ByteBuffer?
    }

    let flags: ConnectionFlags
    let authority: String
    var context: ChannelHandlerContext?
    var exchanges: [HTTP2StreamID: Exchange] = [:]
    /// The next stream id this client opens (odd, increasing; RFC 9113 §5.1.1).
    var nextStreamID: Int32 = 1
    var goingAway = false
    /// One timer per connection, at the earliest deadline of its streams (not one per stream:
    /// scheduling and cancelling a task for each request cost more than its frames).
    var sweep: Scheduled<Void>?
    var sweepAt: NIODeadline?
    /// Bytes of DATA read since the last connection-level WINDOW_UPDATE (frame by frame, no
    /// multiplexer gives the window back): given back by halves of ``connectionWindow``.
    var unacknowledged = 0
    static let connectionWindow = 1 << 20

    init(flags: ConnectionFlags, authority: String) {
        self.flags = flags
        self.authority = authority
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // The connection's window from 65,535 bytes to 1 MiB (answers of many streams at once).
        let increment = Self.connectionWindow - 65_535
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        failAll("the connection closed before the answer")
        sweep?.cancel()
        sweep = nil
        self.context = nil
    }

    /// Opens a stream for each request and writes them out in one flush.
    func start(_ requests: [PendingRequest]) {
        guard let context, context.channel.isActive, !goingAway else {
            for request in requests { request.promise.fail(HTTP2ConnectionError(kind: .lost, description: "HTTP/2: the connection is closing", unprocessed: true)) }
            flags.open.store(false, ordering: .relaxed)
            return
        }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        for request in requests {
            // Ids run out after 2^30 streams: the connection is replaced.
            guard nextStreamID < Int32.max - 2 else {
                flags.open.store(false, ordering: .relaxed)
                request.promise.fail(HTTP2ConnectionError(kind: .lost, description: "HTTP/2: the connection ran out of stream ids", unprocessed: true))
                continue
            }
            let id = HTTP2StreamID(nextStreamID)
            nextStreamID += 2
            exchanges[id] = Exchange(promise: request.promise, deadline: request.deadline)
            arm(request.deadline, context: context, loopBound: loopBound)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: request.headers, endStream: request.body.isEmpty)))), promise: nil)
            if !request.body.isEmpty {
                let body = context.channel.allocator.buffer(bytes: request.body)
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
            }
        }
        context.flush()
    }

    /// Makes sure the sweep runs by `deadline`.
    private func arm(_ deadline: NIODeadline, context: ChannelHandlerContext, loopBound: NIOLoopBound<HTTP2ClientHandler>) {
        if let sweepAt, sweepAt <= deadline { return }
        sweep?.cancel()
        sweepAt = deadline
        sweep = context.eventLoop.scheduleTask(deadline: deadline) { loopBound.value.sweepExpired() }
    }

    /// Resets the streams whose deadline passed, and arms the sweep for the next one.
    func sweepExpired() {
        sweep = nil
        sweepAt = nil
        let now = NIODeadline.now()
        var next: NIODeadline?
        var expired: [HTTP2StreamID] = []
        for (id, exchange) in exchanges {
            if exchange.deadline <= now {
                expired.append(id)
            } else if next.map({ exchange.deadline < $0 }) ?? true {
                next = exchange.deadline
            }
        }
        for id in expired.sorted() { timedOut(id) }
        if let next, let context { arm(next, context: context, loopBound: NIOLoopBound(self, eventLoop: context.eventLoop)) }
    }

    func timedOut(_ id: HTTP2StreamID) {
        guard let exchange = exchanges.removeValue(forKey: id) else { return }
        exchange.promise.fail(HTTP2ConnectionError(kind: .timeout, description: "HTTP/2: no answer within the deadline"))
        if let context, context.channel.isActive {
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if frame.streamID == .rootStream {
            if case .goAway(let last, _, _) = frame.payload {
                goingAway = true
                flags.open.store(false, ordering: .relaxed)
                // Streams above the last one processed never were: resent at once.
                for id in exchanges.keys where id > last {
                    fail(id, HTTP2ConnectionError(kind: .lost, description: "HTTP/2: GOAWAY, the stream was not processed", unprocessed: true))
                }
            }
            return
        }
        let id = frame.streamID
        if case .data(let data) = frame.payload {
            // Every DATA frame counts against the connection's window, even one of a stream
            // given up: the window is given back as it is read.
            unacknowledged += data.data.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0)
            if unacknowledged >= Self.connectionWindow / 2 {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledged))), promise: nil)
                context.flush()
                unacknowledged = 0
            }
        }
        guard exchanges[id] != nil else { return }
        switch frame.payload {
        case .headers(let headers):
            if exchanges[id]!.status == nil {
                guard let text = headers.headers.first(name: ":status"), let code = Int(text), (100...599).contains(code) else {
                    fail(id, HTTP2ConnectionError(kind: .lost, description: "HTTP/2: an answer without a valid :status"))
                    context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.protocolError))), promise: nil)
                    return
                }
                if code < 200 {
                    if headers.endStream { fail(id, HTTP2ConnectionError(kind: .lost, description: "HTTP/2: the stream ended after \(code)")) }
                    return  // informational: the final answer follows
                }
                exchanges[id]!.status = code
                exchanges[id]!.retryAfter = headers.headers.first(name: "retry-after")
            }
            if headers.endStream { finish(id) }
        case .data(let data):
            if case .byteBuffer(var bytes) = data.data {
                let held = exchanges[id]!.body?.readableBytes ?? 0
                let room = HTTP2Transport.maximumAnswerBytes - held
                if room > 0 {
                    if bytes.readableBytes > room { bytes = bytes.getSlice(at: bytes.readerIndex, length: room) ?? bytes }
                    if exchanges[id]!.body == nil { exchanges[id]!.body = bytes } else { exchanges[id]!.body!.writeBuffer(&bytes) }
                }
            }
            if data.endStream { finish(id) }
        case .rstStream(let code):
            fail(id, HTTP2ConnectionError(kind: .lost, description: "HTTP/2: the server reset the stream (\(code))", unprocessed: code == .refusedStream))
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent, exchanges[closed.streamID] != nil {
            if closed.reason == nil, exchanges[closed.streamID]!.status != nil {
                finish(closed.streamID)
            } else {
                fail(closed.streamID, HTTP2ConnectionError(kind: .lost, description: "HTTP/2: the stream closed before the answer (\(closed.reason.map { "\($0)" } ?? "no reason"))"))
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? NIOHTTP2Errors.StreamError {
            fail(error.streamID, HTTP2ConnectionError(kind: .lost, description: "HTTP/2: \(String(describing: error.baseError).prefix(200))"))
            return
        }
        // A connection error: the HTTP/2 handler has sent GOAWAY and closes.
        flags.open.store(false, ordering: .relaxed)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        flags.open.store(false, ordering: .relaxed)
        failAll("the connection closed before the answer")
        context.fireChannelInactive()
    }

    private func finish(_ id: HTTP2StreamID) {
        guard let exchange = exchanges.removeValue(forKey: id) else { return }
        guard let status = exchange.status else {
            exchange.promise.fail(HTTP2ConnectionError(kind: .lost, description: "HTTP/2: the stream ended without an answer"))
            return
        }
        exchange.promise.succeed(ProviderAnswer(status: status, retryAfter: exchange.retryAfter, body: exchange.body.map { Array(buffer: $0) } ?? []))
    }

    private func fail(_ id: HTTP2StreamID, _ error: any Error) {
        guard let exchange = exchanges.removeValue(forKey: id) else { return }
        exchange.promise.fail(error)
    }

    private func failAll(_ reason: String) {
        let all = exchanges
        exchanges.removeAll()
        for exchange in all.values {
            exchange.promise.fail(HTTP2ConnectionError(kind: .lost, description: "HTTP/2: \(reason)"))
        }
    }
}

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
