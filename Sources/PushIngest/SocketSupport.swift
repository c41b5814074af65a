#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import NIOCore
import PushCore
import Synchronization

/// Connections accepted and not yet handed to a connection task.
final class Unserved: Sendable {
    let connections = Mutex<[ObjectIdentifier: NIOAsyncChannel<ByteBuffer, ByteBuffer>]>([:])
}

/// The connections served at once, at most `limit`.
final class ConnectionSlots: Sendable {
    private let open = Mutex(0)
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// Takes a slot; `false` when all are taken.
    func take() -> Bool {
        open.withLock { open in
            guard open < limit else { return false }
            open += 1
            return true
        }
    }

    func give() {
        open.withLock { $0 -= 1 }
    }
}

/// What one connection may have read and not yet answered: at most `maxBytes` bytes of lines and
/// `maxLines` lines (a line larger than `maxBytes` alone is let through when nothing else waits,
/// so that it can be refused with its reason). One reader per budget: `acquire` waits for room.
final class ConnectionBudget: Sendable {
    private struct State {
        var bytes = 0
        var lines = 0
        var waiter: (cost: Int, continuation: CheckedContinuation<Bool, Never>)?
    }

    private let state = Mutex(State())
    let maxBytes: Int
    let maxLines: Int

    init(maxBytes: Int, maxLines: Int) {
        self.maxBytes = max(1, maxBytes)
        self.maxLines = max(1, maxLines)
    }

    /// What the connection holds now.
    var held: (bytes: Int, lines: Int) { state.withLock { ($0.bytes, $0.lines) } }

    private static func fits(_ cost: Int, _ state: State, maxBytes: Int, maxLines: Int) -> Bool {
        state.lines == 0 || (state.lines < maxLines && cost <= maxBytes - state.bytes)
    }

    /// Takes `cost` bytes and one line from the budget, waiting for room; `false` when the task
    /// was cancelled first (the connection is being closed).
    func acquire(_ cost: Int) async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let granted = state.withLock { state -> Bool? in
                    if Task.isCancelled { return false }
                    if Self.fits(cost, state, maxBytes: maxBytes, maxLines: maxLines) {
                        state.bytes += cost
                        state.lines += 1
                        return true
                    }
                    state.waiter = (cost, continuation)
                    return nil
                }
                if let granted { continuation.resume(returning: granted) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                defer { state.waiter = nil }
                return state.waiter?.continuation
            }
            waiter?.resume(returning: false)
        }
    }

    /// Gives back what one answered line took.
    func release(_ cost: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            state.bytes -= cost
            state.lines -= 1
            guard let waiter = state.waiter, Self.fits(waiter.cost, state, maxBytes: maxBytes, maxLines: maxLines) else { return nil }
            state.waiter = nil
            state.bytes += waiter.cost
            state.lines += 1
            return waiter.continuation
        }
        waiter?.resume(returning: true)
    }
}

/// What the line assembler passes on.
enum SocketFrame: Sendable, Equatable {
    case line(ByteBuffer)
    /// A line over the limit: its first 64 KiB and its whole length.
    case tooLong(prefix: ByteBuffer, length: Int)
}

/// Splits a byte stream into lines on `\n`, none longer than `maxLength` (longer ones are
/// reported with their beginning and skipped to their end). It holds at most the current line
/// (≤ `maxLength`, or 64 KiB of one over it) and the last chunk given to it.
struct LineAssembler {
    let maxLength: Int
    private var buffer = ByteBuffer()
    /// Bytes already searched for a newline in the current line.
    private var scanned = 0
    /// The current line is over the limit: its beginning and its length so far.
    private var discarding: (prefix: ByteBuffer, length: Int)?

    static let prefixBytes = 64 << 10

    init(maxLength: Int) {
        self.maxLength = maxLength
    }

    /// Bytes held (the unfinished line).
    var heldBytes: Int { buffer.readableBytes + (discarding?.prefix.readableBytes ?? 0) }

    mutating func append(_ chunk: ByteBuffer) {
        if buffer.readableBytes == 0 {
            buffer = chunk
        } else {
            var chunk = chunk
            if buffer.readerIndex > Self.prefixBytes { buffer.discardReadBytes() }
            buffer.writeBuffer(&chunk)
        }
    }

    /// The next complete line, or `nil` when more bytes are needed.
    mutating func next() -> SocketFrame? {
        let view = buffer.readableBytesView
        if var current = discarding {
            let newline = view.firstIndex(of: UInt8(ascii: "\n"))
            // The beginning kept is the line's first 64 KiB, however the bytes came in.
            let missing = Self.prefixBytes - current.prefix.readableBytes
            if missing > 0 {
                current.prefix.writeBytes(view[view.startIndex..<view.index(view.startIndex, offsetBy: min(missing, (newline ?? view.endIndex) - view.startIndex))])
            }
            if let newline {
                current.length += newline - view.startIndex
                buffer.moveReaderIndex(forwardBy: newline - view.startIndex + 1)
                discarding = nil
                return .tooLong(prefix: current.prefix, length: current.length)
            }
            current.length += view.count
            buffer = ByteBuffer()
            discarding = current
            return nil
        }
        let searchStart = view.index(view.startIndex, offsetBy: min(scanned, view.count))
        if let newline = view[searchStart...].firstIndex(of: UInt8(ascii: "\n")) {
            let length = newline - view.startIndex
            scanned = 0
            if length > maxLength {
                let prefix = buffer.getSlice(at: buffer.readerIndex, length: min(length, Self.prefixBytes))!
                buffer.moveReaderIndex(forwardBy: length + 1)
                return .tooLong(prefix: prefix, length: length)
            }
            let line = buffer.readSlice(length: length)!
            buffer.moveReaderIndex(forwardBy: 1)
            return .line(line)
        }
        scanned = view.count
        if view.count > maxLength {
            // Keep a copy of the beginning only: the rest is counted, not held.
            var prefix = ByteBufferAllocator().buffer(capacity: Self.prefixBytes)
            prefix.writeImmutableBuffer(buffer.getSlice(at: buffer.readerIndex, length: min(view.count, Self.prefixBytes))!)
            discarding = (prefix, view.count)
            buffer = ByteBuffer()
            scanned = 0
        }
        return nil
    }

    /// The last line, sent without its newline before the client closed: a line all the same.
    mutating func finish() -> SocketFrame? {
        defer {
            scanned = 0
            buffer = ByteBuffer()
        }
        if let current = discarding {
            discarding = nil
            return .tooLong(prefix: current.prefix, length: current.length)
        }
        if buffer.readableBytes > 0 { return .line(buffer.readSlice(length: buffer.readableBytes)!) }
        return nil
    }
}

/// A Unix socket listening at `path` with the permission bits `mode`: bound, given its mode,
/// and only then listening, so that no client connects before the mode holds (a connect to a
/// socket that does not listen yet is refused). A socket file left by a dead process is
/// replaced; any other file in the way is refused. Returns the descriptor (non-blocking).
func listeningSocket(at path: String, mode: UInt16, backlog: Int32) throws -> Int32 {
    func failure(_ what: String, _ code: Int32 = errno) -> IngestError {
        IngestError.socket(path, "\(what): \(String(cString: strerror(code)))")
    }
    var info = stat()
    if lstat(path, &info) == 0 {
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw IngestError.socket(path, "a file that is not a socket is in the way; remove it, or give ingest.socket another path")
        }
        guard unlink(path) == 0 else { throw failure("cannot remove the socket a stopped process left") }
    }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
        throw IngestError.socket(path, "the path is \(bytes.count) bytes; a Unix socket path is at most 107")
    }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
    guard descriptor >= 0 else { throw failure("cannot make a socket") }
    let bound = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0 else {
        let error = failure("cannot bind it")
        close(descriptor)
        throw error
    }
    guard chmod(path, mode_t(mode)) == 0 else {
        let error = failure("cannot set its mode to 0\(String(mode, radix: 8))")
        close(descriptor)
        unlink(path)
        throw error
    }
    guard listen(descriptor, backlog) == 0 else {
        let error = failure("cannot listen on it")
        close(descriptor)
        unlink(path)
        throw error
    }
    return descriptor
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
