import NIOCore
import PushCore
import Synchronization

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
