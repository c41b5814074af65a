import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL
import PushCore
import Synchronization

/// A request a sender makes.
public struct OutgoingRequest: Sendable {
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(url: String, headers: [(String, String)], body: [UInt8]) {
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// Why a request got no answer: all of them are worth a retry (SPEC §8: connection errors and
/// timeouts), the request may or may not have reached the provider.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// The connection or stream went away under a sent request (a reset, a GOAWAY, a close
    /// before the answer): the request is resent at once rather than after a back-off.
    public var lostInTransit: Bool
    /// Lost before the server processed it (HTTP/2: a stream above a GOAWAY's last one,
    /// `REFUSED_STREAM`, or never written out): a resend cannot make a duplicate.
    public var unprocessed: Bool

    public init(_ description: String, lostInTransit: Bool = false, unprocessed: Bool = false) {
        self.description = description
        self.lostInTransit = lostInTransit || unprocessed
        self.unprocessed = unprocessed
    }
}

extension HTTPTransport {
    public func start(_ request: OutgoingRequest, timeout: Duration, completion: @escaping @Sendable (Result<ProviderAnswer, TransportError>) -> Void) -> Bool {
        false
    }
}

/// Sends HTTP requests: async-http-client in the service, anything in tests.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and reads the answer (status, `Retry-After`, body up to a bound), or
    /// throws ``TransportError``.
    func send(_ request: OutgoingRequest, timeout: Duration) async throws(TransportError) -> ProviderAnswer
    /// Starts `request` without a task when the transport can: `completion` gets the answer
    /// or the error (on any thread), and the call returns true; false: nothing was started, use
    /// ``send(_:timeout:)``. The default starts nothing.
    func start(_ request: OutgoingRequest, timeout: Duration, completion: @escaping @Sendable (Result<ProviderAnswer, TransportError>) -> Void) -> Bool
    /// Closes the connections (an async-http-client must be, before the process ends).
    func shutdown() async throws
}

extension HTTPTransport {
    public func shutdown() async throws {}
}

/// The shared HTTP client of the service: async-http-client, HTTP/2 where the provider speaks
/// it (TLS with ALPN), pooled connections, a deadline on every request, extra trusted CAs from
/// `delivery.caFile`.
///
/// async-http-client keeps one HTTP/2 connection per host and its per-client throughput has a
/// ceiling (`reference/swift-stack-notes.md`: ~6,000 req/s over HTTP/2 + TLS), so requests are
/// spread round-robin over `clients` independent clients, each with its own connections.
public final class AsyncHTTPTransport: HTTPTransport, Sendable {
    let clients: [HTTPClient]
    let counter = Atomic<Int>(0)
    /// Answers longer than this are cut (a hostile or broken endpoint cannot exhaust memory).
    public static let maximumAnswerBytes = 1 << 20

    /// - Parameters:
    ///   - clients: how many independent clients to spread requests over.
    ///   - caFile: PEM certificates to trust in addition to the system's.
    public init(clients: Int = 4, caFile: String? = nil, eventLoopGroup: any EventLoopGroup = HTTPClient.defaultEventLoopGroup) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            let certificates = try NIOSSLCertificate.fromPEMFile(caFile)
            guard !certificates.isEmpty else { throw TransportError("delivery.caFile \(caFile) holds no PEM certificate") }
            tls.additionalTrustRoots = [.certificates(certificates)]
        }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        configuration.httpVersion = .automatic
        configuration.decompression = .disabled
        configuration.redirectConfiguration = .disallow
        self.clients = (0..<max(1, clients)).map { _ in HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration) }
    }

    public func send(_ request: OutgoingRequest, timeout: Duration) async throws(TransportError) -> ProviderAnswer {
        let client = clients[(counter.wrappingAdd(1, ordering: .relaxed).newValue & Int.max) % clients.count]
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
            throw TransportError(Self.describe(error), lostInTransit: Self.isLostInTransit(error))
        }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError { return "HTTP client: \(error.shortDescription)" }
        return "transport: \(String(describing: error).prefix(200))"
    }

    /// Whether `error` means the connection or stream went away under the request
    /// (`reference/swift-stack-notes.md`: a GOAWAY fails requests with `remoteConnectionClosed`
    /// or `StreamClosed`; streams the server refused were never processed). A refused
    /// connection or a deadline is not: those wait for the back-off.
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

    /// Shuts the clients down (they must be, before the process ends).
    public func shutdown() async throws {
        for client in clients { try await client.shutdown() }
    }
}

extension HTTPClientError {
    var shortDescription: String { String(describing: self).prefix(120).description }
}
