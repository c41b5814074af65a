import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A raw TCP conversation with a local server: for requests no HTTP client would send (broken
/// heads, malformed chunks, slow senders).
final class RawConnection: @unchecked Sendable {
    // @unchecked Sendable: a test uses one connection from one thread at a time.
    let descriptor: Int32

    /// - Parameter receiveBuffer: the socket's receive buffer, set before connecting (so that
    ///   the window it advertises stays that small).
    init(port: Int, receiveBuffer: Int32? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EIO) }
        if var size = receiveBuffer {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(descriptor)
            throw POSIXError(.ECONNREFUSED)
        }
    }

    deinit {
        close(descriptor)
    }

    /// Sends bytes; `false` when the server closed the connection.
    @discardableResult
    func send(_ text: String) -> Bool {
        send(Array(text.utf8))
    }

    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    /// Everything the server sends until it closes the connection or `timeout` passes.
    func receiveAll(timeout: Double) -> (text: String, closed: Bool) {
        var collected: [UInt8] = []
        let end = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while Date() < end {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let remaining = Int32(max(1, end.timeIntervalSinceNow * 1000))
            if poll(&poller, 1, remaining) <= 0 { break }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return (String(decoding: collected, as: UTF8.self), true) }
            collected += buffer[0..<count]
        }
        return (String(decoding: collected, as: UTF8.self), false)
    }

    /// The status code and body of the first response in `text` (its Content-Length bytes).
    static func parse(_ text: String) -> (status: Int, body: String)? {
        let bytes = Array(text.utf8)
        let separator = Array("\r\n\r\n".utf8)
        guard text.hasPrefix("HTTP/1.1 "),
            let headEnd = (0...(bytes.count - separator.count)).first(where: { Array(bytes[$0..<$0 + separator.count]) == separator })
        else { return nil }
        let head = String(decoding: bytes[..<headEnd], as: UTF8.self)
        let status = Int(head.dropFirst(9).prefix(3)) ?? 0
        var body = Array(bytes[(headEnd + separator.count)...])
        for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
            if let length = Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces)), length <= body.count {
                body = Array(body[..<length])
            }
        }
        return (status, String(decoding: body, as: UTF8.self))
    }
}
