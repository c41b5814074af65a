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
        // A socket another process listens on is its own: replacing it would cut that
        // process's clients off without a word.
        if someoneListens(at: path) {
            throw IngestError.socket(path, "another process listens on it; stop that process, or give ingest.socket another path")
        }
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
