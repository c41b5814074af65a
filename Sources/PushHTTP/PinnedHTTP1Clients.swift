import AsyncHTTPClient
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// HTTP/1.1 to a host whose address was checked, connecting to that address and no other: for
/// the origins of outside URLs (Web Push endpoints) that do not speak HTTP/2.
///
/// async-http-client resolves a URL's name itself when it connects: a name checked as public
/// and resolved again a moment later may answer a private address then (DNS rebinding; issue
/// 33). Each client here carries a `dnsOverride` of its host to the checked address (TLS still
/// names the host: SNI and the certificate's name are the host's), so the connection goes where
/// the check looked. Clients are kept per host and address, at most ``maximumClients``, the
/// least recently used shut down for a new one.
final class PinnedHTTP1Clients: Sendable {
    struct Key: Hashable {
        var host: String
        var address: String
    }

    struct State {
        var clients: [Key: (transport: HTTP1Transport, used: UInt64)] = [:]
        var clock: UInt64 = 0
        var closed = false
    }

    static let maximumClients = 16

    let tls: TLSConfiguration
    let idleTimeout: Duration
    let eventLoopGroup: any EventLoopGroup
    let state = Mutex(State())

    init(caFile: String?, idleTimeout: Duration, eventLoopGroup: any EventLoopGroup) throws(TransportError) {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile { tls.additionalTrustRoots = [.certificates(try HTTP1Transport.certificates(caFile))] }
        self.tls = tls
        self.idleTimeout = idleTimeout
        self.eventLoopGroup = eventLoopGroup
    }

    /// Sends `request` (whose URL names `host`) over a connection to `address` (an IP address).
    func send(_ request: OutgoingRequest, host: String, address: String, timeout: Duration) async throws(TransportError) -> ProviderAnswer {
        guard let transport = transport(Key(host: host, address: address)) else { throw TransportError(.shutDown, "the transport is shut down") }
        return try await transport.send(request, timeout: timeout)
    }

    func transport(_ key: Key) -> HTTP1Transport? {
        let (transport, evicted) = state.withLock { state -> (HTTP1Transport?, HTTP1Transport?) in
            guard !state.closed else { return (nil, nil) }
            state.clock &+= 1
            if let known = state.clients[key] {
                state.clients[key] = (known.transport, state.clock)
                return (known.transport, nil)
            }
            var evicted: HTTP1Transport?
            if state.clients.count >= Self.maximumClients, let oldest = state.clients.min(by: { $0.value.used < $1.value.used }) {
                evicted = oldest.value.transport
                state.clients[oldest.key] = nil
            }
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
            configuration.connectionPool = .init(idleTimeout: .milliseconds(max(1, Int64(clamping: idleTimeout.wholeMilliseconds))))
            configuration.httpVersion = .http1Only
            configuration.decompression = .disabled
            configuration.redirectConfiguration = .disallow
            configuration.dnsOverride = [key.host: key.address]
            let made = HTTP1Transport(clients: [HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration)])
            state.clients[key] = (made, state.clock)
            return (made, evicted)
        }
        // A request still on the evicted client fails as the connection closes (retried).
        if let evicted { Task { try? await evicted.shutdown() } }
        return transport
    }

    func shutdown() async {
        let clients = state.withLock { state in
            state.closed = true
            defer { state.clients.removeAll() }
            return state.clients.values.map(\.transport)
        }
        for client in clients { try? await client.shutdown() }
    }
}
