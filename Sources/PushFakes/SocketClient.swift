import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs blocking work (socket calls) on its own thread, off the concurrency pool.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// A client of the Unix-socket source, on a real socket: the demo's database feeding change
/// records, and the tests'.
public final class SocketClient: @unchecked Sendable {
    // @unchecked Sendable: a test uses one client from one thread at a time.
    public let descriptor: Int32

    public init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else { throw POSIXError(.ECONNREFUSED) }
    }

    deinit { close(descriptor) }

    public func send(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return }
            offset += sent
        }
    }

    /// Sends without blocking; returns the bytes the socket took.
    public func trySend(_ bytes: ArraySlice<UInt8>) -> Int {
        bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    }

    /// Answer lines received within `timeout`, until `count` arrived.
    public func answers(_ count: Int, timeout: Double) -> [String] {
        var bytes: [UInt8] = []
        var lines = 0
        let end = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while lines < count && Date() < end {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, Int32(max(1, end.timeIntervalSinceNow * 1000))) <= 0 { break }
            let read = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if read <= 0 { break }
            bytes += buffer[0..<read]
            lines += buffer[0..<read].lazy.filter { $0 == UInt8(ascii: "\n") }.count
        }
        return bytes.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Reads until the service closes the connection or `timeout` passes: whether it closed,
    /// and the text read.
    public func readUntilClosed(timeout: Double) -> (closed: Bool, text: String) {
        var bytes: [UInt8] = []
        let end = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while Date() < end {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, Int32(max(1, end.timeIntervalSinceNow * 1000))) <= 0 { continue }
            let read = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if read <= 0 { return (true, String(decoding: bytes, as: UTF8.self)) }
            bytes += buffer[0..<read]
        }
        return (false, String(decoding: bytes, as: UTF8.self))
    }
}
