import Logging
import NIOCore
import NIOPosix
import PushCore
import ServiceLifecycle
import Synchronization

/// The Unix-socket source (SPEC §4): clients connect and send NDJSON lines; each line is
/// answered, in order, with `{"seq":N,"ok":true}` once its record is durable, or
/// `{"seq":N,"ok":false,"error":"…"}`. Many clients may be connected at once; they share one
/// `seq` sequence (the socket is one source).
///
/// Back-pressure: a connection is read only while the ingest queue has room and while fewer than
/// ``maxUnanswered`` of its lines wait for their answer (a client that sends without reading its
/// answers is not read further). Nothing is buffered without bound.
public struct UnixSocketSource: Service {
    public static let name = "socket"

    public let path: String
    public let queue: IngestQueue
    public let maxLineBytes: Int
    public let maxUnanswered: Int
    public let logger: Logger
    /// Told once the socket listens.
    public let readiness: any SourceReadiness

    public init(
        path: String, queue: IngestQueue, maxLineBytes: Int = 16 << 20, maxUnanswered: Int = 4096, readiness: any SourceReadiness = NoReadiness(),
        logger: Logger
    ) {
        self.readiness = readiness
        self.path = path
        self.queue = queue
        self.maxLineBytes = maxLineBytes
        self.maxUnanswered = maxUnanswered
        self.logger = logger
    }

    public func run() async throws {
        let maxLineBytes = self.maxLineBytes
        // Connections accepted but not yet served when the accept loop stops (a shutdown) are
        // kept here and closed properly: NIO traps on a dropped, unfinished channel.
        let unserved = Unserved()
        let server: NIOAsyncChannel<NIOAsyncChannel<SocketFrame, ByteBuffer>, Never>
        do {
            server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 256)
                // A client that shuts its sending side down still gets its answers.
                .childChannelOption(.allowRemoteHalfClosure, value: true)
                .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineFramer(maxLength: maxLineBytes)))
                        let connection = try NIOAsyncChannel<SocketFrame, ByteBuffer>(
                            wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                        unserved.connections.withLock { $0[ObjectIdentifier(channel)] = connection }
                        return connection
                    }
                }
        } catch {
            throw IngestError.socket(path, "cannot listen on it: \(error)")
        }
        logger.info("listening for change records", metadata: ["socket": "\(path)"])
        readiness.attached(Self.name)
        let counter = Counter()
        func closeUnserved() async {
            for connection in unserved.connections.withLock({ $0.values }) {
                try? await connection.executeThenClose { _, _ in }
            }
        }
        do {
            try await accept(server, unserved: unserved, counter: counter)
        } catch {
            await closeUnserved()
            throw error
        }
        await closeUnserved()
    }

    private func accept(
        _ server: NIOAsyncChannel<NIOAsyncChannel<SocketFrame, ByteBuffer>, Never>,
        unserved: Unserved, counter: Counter
    ) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            try await server.executeThenClose { connections in
                for try await connection in connections.cancelOnGracefulShutdown() {
                    unserved.connections.withLock { $0[ObjectIdentifier(connection.channel)] = nil }
                    let id = counter.value.withLock { value -> Int64 in
                        value += 1
                        return value
                    }
                    group.addTask { await serve(connection, id: id) }
                }
            }
        }
    }

    /// Reads one client's lines into the queue and writes their answers, in order.
    func serve(_ connection: NIOAsyncChannel<SocketFrame, ByteBuffer>, id: Int64) async {
        let logger = self.logger
        let queue = self.queue
        let limiter = Limiter(limit: maxUnanswered)
        do {
            try await connection.executeThenClose { inbound, outbound in
                let (answers, continuation) = AsyncStream<IngestAck>.makeStream()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await ack in answers {
                            let result = await ack.result()
                            limiter.release()
                            try await outbound.write(ByteBuffer(bytes: result.line))
                        }
                    }
                    var number: Int64 = 0
                    do {
                        for try await frame in inbound.cancelOnGracefulShutdown() {
                            number += 1
                            await limiter.acquire()
                            let ack = IngestAck()
                            continuation.yield(ack)
                            let line: IngestLine
                            switch frame {
                            case .line(let buffer):
                                line = IngestLine(bytes: Array(buffer.readableBytesView), source: Self.name, position: number, ack: ack)
                            case .tooLong(let prefix, let length):
                                line = IngestLine(
                                    bytes: Array(prefix.readableBytesView), source: Self.name, position: number, overflow: length, ack: ack)
                            }
                            if await !queue.send(line) {
                                ack.complete(.rejected(seq: nil, reason: "the service is shutting down; send this line again later"))
                                break
                            }
                        }
                    } catch {
                        logger.debug("a socket client's connection failed", metadata: ["connection": "\(id)", "error": "\(error)"])
                    }
                    continuation.finish()
                    try await group.waitForAll()
                }
            }
        } catch {
            logger.debug("a socket client's connection ended with an error", metadata: ["connection": "\(id)", "error": "\(error)"])
        }
    }
}

/// Connections accepted and not yet handed to a connection task.
final class Unserved: Sendable {
    let connections = Mutex<[ObjectIdentifier: NIOAsyncChannel<SocketFrame, ByteBuffer>]>([:])
}

final class Counter: Sendable {
    let value = Mutex<Int64>(0)
}

/// At most `limit` permits out at once; `acquire` waits for one.
final class Limiter: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(limit: Int) {
        state = Mutex(State(available: max(1, limit)))
    }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        waiter?.resume()
    }
}

/// What the line framer passes on.
enum SocketFrame: Sendable {
    case line(ByteBuffer)
    /// A line over the limit: its first 64 KiB and its whole length.
    case tooLong(prefix: ByteBuffer, length: Int)
}

/// Splits a byte stream into lines on `\n`, none longer than `maxLength` (longer ones are
/// reported with their beginning and skipped to their end).
struct LineFramer: ByteToMessageDecoder {
    typealias InboundOut = SocketFrame

    let maxLength: Int
    /// Bytes already searched for a newline in the current line.
    private var scanned = 0
    /// The current line is over the limit: its beginning and its length so far.
    private var discarding: (prefix: ByteBuffer, length: Int)?

    init(maxLength: Int) {
        self.maxLength = maxLength
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let view = buffer.readableBytesView
        if var current = discarding {
            if let newline = view.firstIndex(of: UInt8(ascii: "\n")) {
                current.length += newline - view.startIndex
                buffer.moveReaderIndex(forwardBy: newline - view.startIndex + 1)
                discarding = nil
                context.fireChannelRead(wrapInboundOut(.tooLong(prefix: current.prefix, length: current.length)))
                return .continue
            }
            current.length += view.count
            buffer.moveReaderIndex(forwardBy: view.count)
            discarding = current
            return .needMoreData
        }
        let searchStart = view.index(view.startIndex, offsetBy: min(scanned, view.count))
        if let newline = view[searchStart...].firstIndex(of: UInt8(ascii: "\n")) {
            let length = newline - view.startIndex
            scanned = 0
            if length > maxLength {
                let prefix = buffer.getSlice(at: buffer.readerIndex, length: min(length, 64 << 10))!
                buffer.moveReaderIndex(forwardBy: length + 1)
                context.fireChannelRead(wrapInboundOut(.tooLong(prefix: prefix, length: length)))
                return .continue
            }
            let line = buffer.readSlice(length: length)!
            buffer.moveReaderIndex(forwardBy: 1)
            context.fireChannelRead(wrapInboundOut(.line(line)))
            return .continue
        }
        scanned = view.count
        if view.count > maxLength {
            discarding = (buffer.getSlice(at: buffer.readerIndex, length: min(view.count, 64 << 10))!, view.count)
            buffer.moveReaderIndex(forwardBy: view.count)
            scanned = 0
        }
        return .needMoreData
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        // A last line without its newline, sent before the client closed: a line all the same.
        if let current = discarding {
            discarding = nil
            context.fireChannelRead(wrapInboundOut(.tooLong(prefix: current.prefix, length: current.length)))
        } else if buffer.readableBytes > 0 {
            let line = buffer.readSlice(length: buffer.readableBytes)!
            context.fireChannelRead(wrapInboundOut(.line(line)))
        }
        scanned = 0
        return .needMoreData
    }
}
