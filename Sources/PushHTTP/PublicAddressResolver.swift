import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Resolves a host to an address a request built from outside input may reach: the first one
/// ``AddressClass/isPublic(_:)`` accepts. The connection is then made to that address (the TLS
/// server name stays the host's), so what was checked is what is connected to.
enum PublicAddressResolver {
    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    /// Resolves on NIO's blocking-I/O pool (getaddrinfo blocks).
    static func resolve(host: String, port: Int, eventLoop: any EventLoop) -> EventLoopFuture<SocketAddress> {
        NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) { try firstPublic(host: host, port: port) }
    }

    static func resolve(host: String, port: Int) async throws -> SocketAddress {
        try await NIOThreadPool.singleton.runIfActive { try firstPublic(host: host, port: port) }
    }

    static func firstPublic(host: String, port: Int) throws -> SocketAddress {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw Refused(description: "cannot resolve \(host.prefix(100)) (getaddrinfo \(status))")
        }
        defer { freeaddrinfo(first) }
        var refused = 0
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let current = node {
            defer { node = current.pointee.ai_next }
            guard let address = current.pointee.ai_addr else { continue }
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                let socket = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self)
                let bytes = withUnsafeBytes(of: socket.sin_addr) { Array($0) }
                if AddressClass.isPublic(bytes) { return SocketAddress(socket, host: host) }
                refused += 1
            case AF_INET6:
                let socket = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self)
                let bytes = withUnsafeBytes(of: socket.sin6_addr) { Array($0) }
                if AddressClass.isPublic(bytes) { return SocketAddress(socket, host: host) }
                refused += 1
            default:
                continue
            }
        }
        throw Refused(
            description: "\(host.prefix(100)) resolves only to addresses that are not public (\(refused) loopback, private or reserved): not connected")
    }
}
