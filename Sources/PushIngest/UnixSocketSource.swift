#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Logging
import NIOCore
import NIOPosix
import PushCore
import PushContracts
import ServiceLifecycle
import Synchronization

/// The limits of the Unix socket (`ingest.socket*`), so that no client, careless or hostile, can
/// take the service's memory, its connection slots or its shutdown.
public struct SocketLimits: Sendable, Equatable {
    /// `ingest.socketMode`: the socket file's permission bits (who may connect). Default 0660:
    /// the service's user and group.
    public var mode: UInt16
    /// `ingest.socketMaxConnections`: connections served at once; one more is answered with an
    /// error line and closed. Default 64.
    public var maxConnections: Int
    /// `ingest.socketIdleTimeout`: a connection that sent nothing and was answered nothing for
    /// this long is closed. Default 15 minutes.
    public var idleTimeout: Duration
    /// `ingest.socketMaxBuffered`: bytes of lines one connection may have sent and not yet had
    /// answered; past it, the connection is not read further until answers go out. Default 8 MiB
    /// (a single longer line is taken alone).
    public var maxBufferedBytes: Int
    /// Lines one connection may have unanswered. 4096.
    public var maxUnanswered: Int
    /// `ingest.socketShutdownGrace`: on a graceful shutdown, reading stops at once and each
    /// connection has this long to take its answers; then it is closed (what it sent is committed
    /// all the same, its client sends the unanswered lines again). Default 10 s.
    public var shutdownGrace: Duration

    public init(
        mode: UInt16 = 0o660, maxConnections: Int = 64, idleTimeout: Duration = .seconds(900), maxBufferedBytes: Int = 8 << 20,
        maxUnanswered: Int = 4096, shutdownGrace: Duration = .seconds(10)
    ) {
        self.mode = mode
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
        self.maxBufferedBytes = maxBufferedBytes
        self.maxUnanswered = maxUnanswered
        self.shutdownGrace = shutdownGrace
    }

    /// Per line, what a connection's budget counts beside the line's bytes (what the service keeps
    /// for it while it waits).
    static let lineOverhead = 64
}

/// The Unix-socket source (SPEC §4): clients connect and send NDJSON lines; each line is
/// answered, in order, with `{"seq":N,"ok":true}` once its record is durable,
/// `{"seq":N,"ok":true,"duplicate":true,"watermark":W}` for a record accepted before (a resend),
/// or `{"seq":N,"ok":false,"error":"…"}`. Many clients may be connected at once; they share one
/// `seq` sequence (the socket is one source).
///
/// What one connection holds is bounded: the line being read (at most `maxLineBytes`; of a
/// longer one, its first 64 KiB), a few chunks read from the socket (at most 4 × 64 KiB waiting),
/// and the lines sent and not yet answered (``SocketLimits/maxBufferedBytes``, or one longer
/// line alone). A client that sends without reading its answers is not read further; it holds
/// neither the other clients (each connection has its budget) nor a shutdown (it is closed
/// ``SocketLimits/shutdownGrace`` after the shutdown began).
public struct UnixSocketSource: Service {
    public static let name = "socket"

    public let path: String
    public let queue: IngestQueue
    public let maxLineBytes: Int
    public let limits: SocketLimits
    public let logger: Logger
    /// Told once the socket listens.
    public let readiness: any SourceReadiness

    public init(
        path: String, queue: IngestQueue, maxLineBytes: Int = 16 << 20, limits: SocketLimits = SocketLimits(),
        readiness: any SourceReadiness = NoReadiness(), logger: Logger
    ) {
        self.readiness = readiness
        self.path = path
        self.queue = queue
        self.maxLineBytes = maxLineBytes
        self.limits = limits
        self.logger = logger
    }

    typealias Connection = NIOAsyncChannel<ByteBuffer, ByteBuffer>

    /// A connection accepted, with what it may hold (its idle check reads it too).
    struct Accepted: Sendable {
        let connection: Connection
        let budget: ConnectionBudget
        let answers: SocketAnswers
    }

    public func run() async throws {
        let logger = self.logger
        let limits = self.limits
        // Connections accepted but not yet served when the accept loop stops (a shutdown) are
        // kept here and closed properly: NIO traps on a dropped, unfinished channel.
        let unserved = Unserved()
        let server: NIOAsyncChannel<Accepted, Never>
        // A socket another process listens on is its own: replacing it would cut that
        // process's clients off without a word.
        if someoneListens(at: path) {
            throw IngestError.socket(path, "another process listens on it; stop that process, or give ingest.socket another path")
        }
        // Bound, given its mode, and only then listening: nobody connects before the mode holds.
        let descriptor = try listeningSocket(at: path, mode: limits.mode, backlog: 256)
        do {
            server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                // A client that shuts its sending side down still gets its answers.
                .childChannelOption(.allowRemoteHalfClosure, value: true)
                .bind(descriptor) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: TimeAmount(limits.idleTimeout)))
                        let budget = ConnectionBudget(maxBytes: limits.maxBufferedBytes, maxLines: limits.maxUnanswered)
                        try channel.pipeline.syncOperations.addHandler(IdleCloser(timeout: limits.idleTimeout, budget: budget, logger: logger))
                        let answers = SocketAnswers(channel: channel, budget: budget)
                        try channel.pipeline.syncOperations.addHandler(SocketAnswersHandler(answers))
                        // Chunks of at most 64 KiB (the socket's read allocator); a few wait at most.
                        let connection = try Connection(
                            wrappingChannelSynchronously: channel,
                            configuration: .init(backPressureStrategy: .init(lowWatermark: 2, highWatermark: 4), isOutboundHalfClosureEnabled: true))
                        unserved.connections.withLock { $0[ObjectIdentifier(channel)] = connection }
                        return Accepted(connection: connection, budget: budget, answers: answers)
                    }
                }
        } catch {
            close(descriptor)
            unlink(path)
            throw IngestError.socket(path, "cannot listen on it: \(error)")
        }
        logger.info(
            "listening for change records",
            metadata: [
                "socket": "\(path)", "mode": "0\(String(limits.mode, radix: 8))", "maxConnections": "\(limits.maxConnections)",
            ])
        readiness.attached(Self.name)
        func closeUnserved() async {
            for connection in unserved.connections.withLock({ $0.values }) {
                try? await connection.executeThenClose { _, _ in }
            }
        }
        do {
            try await accept(server, unserved: unserved)
        } catch {
            await closeUnserved()
            throw error
        }
        await closeUnserved()
    }

    private func accept(_ server: NIOAsyncChannel<Accepted, Never>, unserved: Unserved) async throws {
        let slots = ConnectionSlots(limit: limits.maxConnections)
        let refusals = RefusalLog()
        var counter: Int64 = 0
        try await withThrowingDiscardingTaskGroup { group in
            try await server.executeThenClose { connections in
                for try await accepted in connections.cancelOnGracefulShutdown() {
                    let connection = accepted.connection
                    unserved.connections.withLock { $0[ObjectIdentifier(connection.channel)] = nil }
                    counter += 1
                    let id = counter
                    guard slots.take() else {
                        refusals.refused(limit: limits.maxConnections, logger: logger)
                        group.addTask { await refuse(connection) }
                        continue
                    }
                    group.addTask {
                        await serve(connection, budget: accepted.budget, answers: accepted.answers, id: id)
                        slots.give()
                    }
                }
            }
        }
    }

    /// Tells a connection over the limit why it is closed.
    private func refuse(_ connection: Connection) async {
        let answer = AckResult.rejected(
            seq: nil,
            reason: "too many connections: \(limits.maxConnections) are open (ingest.socketMaxConnections); connect again later")
        try? await connection.executeThenClose { _, outbound in
            try await outbound.write(ByteBuffer(bytes: answer.line))
        }
    }

    /// Serves one client until it closes, its connection fails, or a shutdown's grace is over.
    func serve(_ connection: Connection, budget: ConnectionBudget, answers: SocketAnswers, id: Int64) async {
        let grace = limits.shutdownGrace
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await exchange(connection, budget: budget, answers: answers, id: id)
                return true
            }
            group.addTask { await Self.shutdownDeadline(grace) }
            if await group.next() == false {
                logger.warning(
                    "closing a socket connection whose answers were not taken within the shutdown grace; its client sends them again",
                    metadata: ["connection": "\(id)", "grace": "\(grace)"])
                connection.channel.close(promise: nil)
            }
            group.cancelAll()
        }
    }

    /// Returns `false` once a graceful shutdown began and `grace` passed since; `true` when
    /// cancelled first.
    static func shutdownDeadline(_ grace: Duration) async -> Bool {
        let (began, signal) = AsyncStream<Void>.makeStream()
        await withGracefulShutdownHandler {
            var iterator = began.makeAsyncIterator()
            _ = await iterator.next()  // nil when cancelled
        } onGracefulShutdown: {
            signal.yield()
        }
        guard !Task.isCancelled else { return true }
        do {
            try await Task.sleep(for: grace)
        } catch {
            return true
        }
        return false
    }

    /// Reads one client's lines into the queue; their answers are written in order as they
    /// complete (``SocketAnswers``).
    func exchange(_ connection: Connection, budget: ConnectionBudget, answers: SocketAnswers, id: Int64) async {
        let logger = self.logger
        let queue = self.queue
        var assembler = LineAssembler(maxLength: maxLineBytes)
        do {
            try await connection.executeThenClose { inbound, _ in
                var number: Int64 = 0
                /// Hands one line to the queue once the connection's budget has room for it.
                func pass(_ frame: SocketFrame) async -> Bool {
                    let line: [UInt8]
                    var overflow: Int?
                    switch frame {
                    case .line(let buffer):
                        line = Array(buffer.readableBytesView)
                    case .tooLong(let prefix, let length):
                        line = Array(prefix.readableBytesView)
                        overflow = length
                    }
                    let cost = line.count + SocketLimits.lineOverhead
                    guard await budget.acquire(cost) else { return false }
                    number += 1
                    let ack = IngestAck()
                    guard answers.append(ack, cost: cost) else { return false }
                    if await !queue.send(IngestLine(bytes: line, source: Self.name, position: number, overflow: overflow, ack: ack)) {
                        ack.complete(.rejected(seq: nil, reason: "the service is shutting down; send this line again later"))
                        return false
                    }
                    return true
                }
                do {
                    var going = true
                    reading: for try await chunk in inbound.cancelOnGracefulShutdown() {
                        assembler.append(chunk)
                        while let frame = assembler.next() {
                            guard await pass(frame) else {
                                going = false
                                break reading
                            }
                        }
                    }
                    // The client closed after a last line without its newline: a line all the
                    // same. (A shutdown, not the client, may have ended the reading: then an
                    // unfinished line is not one.)
                    if going && !Task.isShuttingDownGracefully && !Task.isCancelled, let frame = assembler.finish() {
                        _ = await pass(frame)
                    }
                } catch {
                    logger.debug("a socket client's connection failed", metadata: ["connection": "\(id)", "error": "\(error)"])
                }
                await answers.finish()
            }
        } catch {
            logger.debug("a socket client's connection ended with an error", metadata: ["connection": "\(id)", "error": "\(error)"])
        }
    }
}

/// Closes a connection its `IdleStateHandler` reports idle (nothing read, nothing written),
/// unless the service owes it answers it can write: a client waiting for a slow commit is not
/// idle. (A client that does not read its answers is: the connection is then not writable.)
final class IdleCloser: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let timeout: Duration
    let budget: ConnectionBudget
    let logger: Logger

    init(timeout: Duration, budget: ConnectionBudget, logger: Logger) {
        self.timeout = timeout
        self.budget = budget
        self.logger = logger
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .all {
            if context.channel.isWritable && budget.held.lines > 0 { return }
            logger.info("closing an idle socket connection (nothing sent or answered)", metadata: ["idleTimeout": "\(timeout)"])
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// Logs refused connections at most once per 10 s, with how many were refused since.
final class RefusalLog: Sendable {
    private let state = Mutex<(last: ContinuousClock.Instant?, since: Int)>((nil, 0))

    func refused(limit: Int, logger: Logger) {
        let now = ContinuousClock.now
        let count = state.withLock { state -> Int? in
            state.since += 1
            if let last = state.last, now - last < .seconds(10) { return nil }
            defer { state = (now, 0) }
            return state.since
        }
        if let count {
            logger.warning(
                "refused socket connections: the limit of open connections is reached (ingest.socketMaxConnections)",
                metadata: ["limit": "\(limit)", "refused": "\(count)"])
        }
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        self = nanoseconds.overflow ? .nanoseconds(.max) : .nanoseconds(nanoseconds.partialValue.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue)
    }
}
