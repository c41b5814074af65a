#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Random bytes for GCM nonces and content keys: the kernel's CSPRNG, fetched 4 KiB at a time
/// and handed out once each.
///
/// One `getrandom` system call per payload cost ~12% of an encrypted v2 payload. Buffering
/// kernel randomness in process memory is what userspace generators (BoringSSL's among them)
/// do too; bytes are never handed out twice. The process does not fork, so no child can
/// inherit and replay the buffer.
enum RandomPool {
    private static let capacity = 4096
    private static let state = Mutex((buffer: [UInt8](repeating: 0, count: capacity), position: capacity))

    /// `count` fresh random bytes (at most 4096).
    static func bytes(_ count: Int) -> [UInt8] {
        precondition(count <= capacity, "RandomPool hands out at most \(capacity) bytes at a time")
        return state.withLock { state in
            if state.position + count > capacity {
                state.buffer.withUnsafeMutableBytes { refill($0) }
                state.position = 0
            }
            defer { state.position += count }
            return Array(state.buffer[state.position..<(state.position + count)])
        }
    }

    private static func refill(_ buffer: UnsafeMutableRawBufferPointer) {
        #if canImport(Darwin)
        // arc4random_buf draws from the kernel's CSPRNG and cannot fail.
        arc4random_buf(buffer.baseAddress!, buffer.count)
        #else
        // /dev/urandom is the kernel CSPRNG that getrandom(2) reads (Swift's Glibc module does
        // not expose getrandom); it never blocks once the kernel is seeded.
        var filled = 0
        while filled < buffer.count {
            let result = read(urandom, buffer.baseAddress! + filled, buffer.count - filled)
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else { fatalError("reading /dev/urandom failed: errno \(errno); no safe randomness for encryption") }
            filled += result
        }
        #endif
    }

    #if !canImport(Darwin)
    private static let urandom: Int32 = {
        let descriptor = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { fatalError("cannot open /dev/urandom: errno \(errno); no safe randomness for encryption") }
        return descriptor
    }()
    #endif
}
