import AsyncHTTPClient
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// async-http-client: what ``HTTP2Transport`` hands `http://` URLs and origins whose TLS
/// handshake did not agree on `h2` (webhooks, plain-text fakes), so HTTP/1.1 in practice. One
/// per process in the service, shared by every HTTP/2 transport; a deadline on every request,
/// extra trusted CAs from `delivery.caFile`, no redirects, no decompression, answers cut at
/// ``maximumAnswerBytes``.
public final class HTTP1Transport: HTTPTransport, Sendable {
    /// One client in the service; the benchmark spreads HTTP/1.1 sends over several.
    let clients: [HTTPClient]
    let counter = Atomic<Int>(0)
    let closed = Atomic<Bool>(false)
    /// Answers longer than this are cut (a hostile or broken endpoint cannot exhaust memory).
    public static let maximumAnswerBytes = 1 << 20

    /// - Parameters:
    ///   - clients: how many independent clients to spread requests over. Default 1.
    ///   - caFile: PEM certificates to trust in addition to the system's.
    ///   - idleTimeout: how long an idle connection is kept. Default 60 s.
    public convenience init(
        clients: Int = 1, caFile: String? = nil, idleTimeout: Duration = .seconds(60),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws(TransportError) {
        // What can fail is done before any stored property exists (see HTTP2Transport).
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile { tls.additionalTrustRoots = [.certificates(try Self.certificates(caFile))] }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.connectionPool = .init(
            idleTimeout: .milliseconds(max(1, Int64(clamping: idleTimeout.wholeMilliseconds))), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        // HTTP/2 where TLS agrees on it: only the benchmark's reference sends https through here.
        configuration.httpVersion = .automatic
        configuration.decompression = .disabled
        configuration.redirectConfiguration = .disallow
        self.init(clients: (0..<max(1, min(clients, 64))).map { _ in HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration) })
    }

    init(clients: [HTTPClient]) {
        self.clients = clients
    }

    /// The certificates of a PEM file, or why not (never empty).
    static func certificates(_ caFile: String) throws(TransportError) -> [NIOSSLCertificate] {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(caFile)
        } catch {
            throw TransportError(.configuration, "delivery.caFile \(caFile.prefix(200)): cannot read PEM certificates (\(String(describing: error).prefix(200)))")
        }
        guard !certificates.isEmpty else { throw TransportError(.configuration, "delivery.caFile \(caFile.prefix(200)) holds no PEM certificate") }
        return certificates
    }

    public func send(_ request: OutgoingRequest, timeout: Duration) async throws(TransportError) -> ProviderAnswer {
        guard !closed.load(ordering: .relaxed) else { throw TransportError(.shutDown, "the transport is shut down") }
        let client = clients.count == 1 ? clients[0] : clients[(counter.wrappingAdd(1, ordering: .relaxed).newValue & Int.max) % clients.count]
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = .POST
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        outgoing.body = .bytes(ByteBuffer(bytes: request.body))
        let milliseconds = max(1, timeout.wholeMilliseconds)
        do {
            let response = try await client.execute(outgoing, timeout: .milliseconds(milliseconds))
            var body = ByteBuffer()
            for try await var chunk in response.body {
                let room = Self.maximumAnswerBytes - body.readableBytes
                if chunk.readableBytes > room {
                    if room > 0, let slice = chunk.readSlice(length: room) { body.writeImmutableBuffer(slice) }
                    break
                }
                body.writeBuffer(&chunk)
            }
            return ProviderAnswer(
                status: Int(response.status.code), retryAfter: response.headers.first(name: "retry-after"),
                body: Array(buffer: body))
        } catch {
            throw Self.transportError(error)
        }
    }

    /// What an async-http-client failure is to a sender.
    static func transportError(_ error: any Error) -> TransportError {
        let description = Self.describe(error)
        if Self.isLostInTransit(error) { return TransportError(.lost, description, lostInTransit: true) }
        switch error as? HTTPClientError {
        case .some(.deadlineExceeded), .some(.readTimeout), .some(.writeTimeout): return TransportError(.timeout, description)
        case .some(.connectTimeout), .some(.tlsHandshakeTimeout), .some(.socksHandshakeTimeout), .some(.httpProxyHandshakeTimeout):
            return TransportError(.connect, description)
        case .some(.alreadyShutdown): return TransportError(.shutDown, description)
        default: break
        }
        if error is NIOConnectionError || error is NIOSSLError { return TransportError(.connect, description) }
        return TransportError(.other, description)
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError { return "HTTP client: \(String(describing: error).prefix(120))" }
        return "transport: \(String(describing: error).prefix(200))"
    }

    /// Whether `error` means the connection went away under the request. A refused connection
    /// or a deadline is not: those wait for the back-off.
    static func isLostInTransit(_ error: any Error) -> Bool {
        switch error {
        case let error as HTTPClientError: return error == .remoteConnectionClosed
        case is NIOHTTP2Errors.StreamClosed: return true
        case let error as ChannelError: return error == .ioOnClosedChannel || error == .eof || error == .outputClosed
        case let error as IOError: return error.errnoCode == ECONNRESET || error.errnoCode == EPIPE
        case let error as NIOSSLError: return error == .uncleanShutdown
        default: return false
        }
    }

    /// Shuts the clients down (they must be, before the process ends); again: nothing.
    public func shutdown() async throws {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        for client in clients { try await client.shutdown() }
    }
}
