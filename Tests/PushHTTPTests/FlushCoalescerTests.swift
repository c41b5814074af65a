import NIOCore
import NIOEmbedded
@testable import PushHTTP
import Testing

/// What the HTTP/2 handler writes in one turn of the event loop reaches TLS as one buffer.
@Suite("Flush coalescer: one turn's writes as one buffer")
struct FlushCoalescerTests {
    static func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(FlushCoalescer())
        return channel
    }

    static func bytes(_ text: String) -> IOData { .byteBuffer(ByteBuffer(string: text)) }

    static func written(_ channel: EmbeddedChannel) throws -> [String] {
        var all: [String] = []
        while let data = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = data else {
                Issue.record("a file region was written")
                continue
            }
            all.append(String(buffer: buffer))
        }
        return all
    }

    @Test("frames written and flushed in one turn leave as one buffer, in order, when the turn ends; every promise completes")
    func merged() throws {
        let channel = try Self.channel()
        let first = channel.eventLoop.makePromise(of: Void.self)
        let third = channel.eventLoop.makePromise(of: Void.self)
        channel.write(Self.bytes("HEAD"), promise: first)
        channel.flush()
        channel.write(Self.bytes("DATA-HEADER"), promise: nil)
        channel.write(Self.bytes("payload"), promise: third)
        channel.flush()
        #expect(try Self.written(channel) == [], "a flush waits for the end of the turn")
        channel.embeddedEventLoop.run()
        #expect(try Self.written(channel) == ["HEADDATA-HEADERpayload"])
        var completed = 0
        first.futureResult.whenSuccess { completed += 1 }
        third.futureResult.whenSuccess { completed += 1 }
        #expect(completed == 2)
        _ = try channel.finish()
    }

    @Test("each turn's writes are a buffer of their own; a turn without writes writes nothing")
    func turns() throws {
        let channel = try Self.channel()
        channel.write(Self.bytes("one"), promise: nil)
        channel.flush()
        channel.embeddedEventLoop.run()
        channel.flush()
        channel.embeddedEventLoop.run()
        channel.write(Self.bytes("two"), promise: nil)
        channel.write(Self.bytes("three"), promise: nil)
        channel.flush()
        channel.embeddedEventLoop.run()
        #expect(try Self.written(channel) == ["one", "twothree"])
        _ = try channel.finish()
    }

    /// Sees what the coalescer hands on (it sits where TLS does).
    final class Recorder: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = IOData
        var seen: [String] = []

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            if case .byteBuffer(let buffer) = unwrapOutboundIn(data) { seen.append(String(buffer: buffer)) }
            context.write(data, promise: promise)
        }

        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            seen.append("(close)")
            context.close(mode: mode, promise: promise)
        }
    }

    @Test("bytes written and never flushed are handed on before the close (the channel fails them, as it would without the coalescer)")
    func closed() throws {
        let channel = EmbeddedChannel()
        let recorder = Recorder()
        try channel.pipeline.syncOperations.addHandler(recorder)
        try channel.pipeline.syncOperations.addHandler(FlushCoalescer())
        channel.write(Self.bytes("never "), promise: nil)
        channel.write(Self.bytes("flushed"), promise: nil)
        #expect(recorder.seen == [])
        _ = try channel.finish()
        #expect(recorder.seen == ["never flushed", "(close)"])
    }
}
