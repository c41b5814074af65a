import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL

/// What every connection of a transport is made with.
struct HTTP2ConnectionSettings: Sendable {
    let tls: NIOSSLContext
    let group: any EventLoopGroup
    /// How long a TCP connect and TLS handshake may take.
    let connectTimeout: TimeAmount
    /// Connect only to a public address the host resolves to.
    let publicAddressesOnly: Bool
}

extension HTTP2Connection {
    /// TCP, TLS with ALPN `h2`, then HTTP/2.
    static func connect(to target: RequestTarget, settings: HTTP2ConnectionSettings) -> EventLoopFuture<HTTP2Connection> {
        let tls = settings.tls
        let serverName = target.hostIsAddress ? nil : target.host
        let timeout = settings.connectTimeout
        let group = settings.group
        @Sendable func bootstrap() -> ClientBootstrap {
            ClientBootstrap(group: group)
                .connectTimeout(timeout)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handshake = ALPNWaiter(promise: channel.eventLoop.makePromise(), timeout: timeout)
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverName))
                        try channel.pipeline.syncOperations.addHandler(handshake)
                    }
                }
        }
        let connected: EventLoopFuture<any Channel>
        if settings.publicAddressesOnly {
            // Connected to the address that was checked, not to the name resolved again.
            connected = PublicAddressResolver.resolve(host: target.host, port: target.port, eventLoop: group.next()).flatMap { address in
                bootstrap().connect(to: address)
            }
        } else {
            connected = bootstrap().connect(host: target.host, port: target.port)
        }
        return connected.flatMap { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.handler(type: ALPNWaiter.self).promise.futureResult }
                .flatMap { $0 }
                .flatMapThrowing { negotiated -> Void in
                    guard negotiated == "h2" else {
                        channel.close(promise: nil)
                        throw HTTP2ConnectionError(
                            kind: .notHTTP2, description: "\(target.host):\(target.port) did not agree on HTTP/2 in TLS (ALPN \(negotiated ?? "none"))")
                    }
                }
                .flatMapThrowing { () -> HTTP2Connection in
                    let sync = channel.pipeline.syncOperations
                    var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
                    connectionConfiguration.initialSettings = [
                        HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
                        HTTP2Setting(parameter: .enablePush, value: 0),
                        HTTP2Setting(parameter: .maxHeaderListSize, value: HTTP2Transport.maximumHeaderListSize),
                        // Answers are small: no stream needs a window update.
                        HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                    ]
                    // A server that answers before it reads a body resets the stream after its
                    // answer (nginx: RST_STREAM NO_ERROR), once per request: the default
                    // limits (200 resets or stream errors, or 200 glitches, per 30 s) would
                    // close a busy connection within a second. A server's resets cost it more
                    // than us; these bounds stay far above any provider's rate.
                    connectionConfiguration.maximumConnectionGlitches = 1_000_000
                    // Header blocks are checked by this client, both ways (HTTP2Fields): the
                    // handler's validation read every field as a string (1.3 % of the samples).
                    connectionConfiguration.headerBlockValidation = .disabled
                    var streamConfiguration = NIOHTTP2Handler.StreamConfiguration()
                    streamConfiguration.streamResetFrameRateLimit.maximumCount = 1_000_000
                    streamConfiguration.streamResetFrameRateLimit.windowLength = .seconds(10)
                    streamConfiguration.streamErrorRateLimit.maximumCount = 1_000_000
                    streamConfiguration.streamErrorRateLimit.windowLength = .seconds(10)
                    // Between TLS and HTTP/2: the writes and flushes of one turn of the event
                    // loop become one buffer, one TLS write and one system call.
                    try sync.addHandler(FlushCoalescer())
                    try sync.addHandler(
                        NIOHTTP2Handler(mode: .client, connectionConfiguration: connectionConfiguration, streamConfiguration: streamConfiguration))
                    let flags = ConnectionFlags()
                    let client = HTTP2ClientHandler(flags: flags)
                    try sync.addHandler(client)
                    // Last: what the server sent since the handshake (its SETTINGS) is held by
                    // the waiter and handed to the HTTP/2 handler as the waiter leaves.
                    _ = try sync.removeHandler(sync.handler(type: ALPNWaiter.self))
                    return HTTP2Connection(channel: channel, handler: client, flags: flags)
                }
                .flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
        }.flatMapErrorThrowing { error in
            if error is HTTP2ConnectionError || error is PublicAddressResolver.Refused { throw error }
            throw HTTP2ConnectionError(
                kind: .connect, description: "cannot connect to \(target.host):\(target.port): \(HTTP2Transport.describe(error))")
        }
    }
}
