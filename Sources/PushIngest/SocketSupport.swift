#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
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

/// Whether a process accepts connections on the Unix socket at `path` now. A socket file left by
/// a process that died answers nothing (connection refused) and may be replaced; a live one
/// belongs to another process, which must not lose it.
func someoneListens(at path: String) -> Bool {
    var info = stat()
    guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return false }
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
    withUnsafeMutableBytes(of: &address.sun_path) { buffer in
        buffer.copyBytes(from: bytes)
    }
    let connected = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    return connected == 0
}
