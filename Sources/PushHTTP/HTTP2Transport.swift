import Logging
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import PushCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// HTTP/2 over TLS straight on swift-nio-http2: what FCM, HMS and APNs speak.
///
/// Per origin (host and port), ``Configuration/connectionsPerOrigin`` connections, each
/// carrying many requests at once as streams; a request takes the connection with the fewest
/// streams open. A request is two frames written on the connection's event loop (no channel per
/// stream), requests handed over together leave in one write, and the answer completes a
/// promise. Which connection, when to connect and when to close is the pool's
/// (``HTTP2PoolStateMachine``); what each stream is waiting for, the connection's
/// (``HTTP2StreamStateMachine``).
///
/// - A connection that receives GOAWAY takes no new stream and is replaced; its streams above
///   the last one the server processed fail as lost in transit (``TransportError/lostInTransit``)
///   and are resent at once by the sender; so does a stream reset with `REFUSED_STREAM`
///   (never processed) or any reset or close before the answer.
/// - Every request has its deadline (the stream is reset when it passes); a request that found
///   no connection within it fails the same way.
/// - Connections without a request for ``Configuration/idleTimeout`` are closed; at most
///   ``Configuration/maximumOrigins`` origins are held, the least recently used idle one
///   dropped for a new one (Web Push endpoints come from subscribers: without a bound, a
///   subscriber who controls DNS could make the service hold a connection per name).
/// - `http://` URLs, and origins whose TLS handshake does not agree on `h2` (ALPN), go to
///   `fallback` (HTTP/1.1: webhooks, plain-text fakes); with
///   ``Configuration/publicAddressesOnly``, to HTTP/1.1 clients pinned to the address that was
///   checked (``PinnedHTTP1Clients``: the name is never resolved again to connect).
public final class HTTP2Transport: HTTPTransport, Sendable {
    public struct Configuration: Sendable {
        /// Connections per origin. Default 4.
        public var connectionsPerOrigin: Int
        /// How long a TCP connect and TLS handshake may take. Default 10 s.
        public var connectTimeout: Duration
        /// PEM certificates to trust in addition to the system's.
        public var caFile: String?
        /// Connect only to public addresses (``AddressClass/isPublic(_:)``): the host is
        /// resolved first and the connection made to a public address it resolves to, else
        /// refused. For URLs that come from outside (Web Push endpoints). Default false.
        public var publicAddressesOnly: Bool
        /// A connection with no stream open whose origin had no request for this long is
        /// closed. Default 60 s.
        public var idleTimeout: Duration
        /// Origins held at most; a new one takes the place of the least recently used one with
        /// no request in flight, or waits (``TransportError/Kind/tooManyOrigins``, retried
        /// with the back-off). Default 1,024.
        public var maximumOrigins: Int

        public init(
            connectionsPerOrigin: Int = 4, connectTimeout: Duration = .seconds(10), caFile: String? = nil, publicAddressesOnly: Bool = false,
            idleTimeout: Duration = .seconds(60), maximumOrigins: Int = 1_024
        ) {
            self.connectionsPerOrigin = connectionsPerOrigin
            self.connectTimeout = connectTimeout
            self.caFile = caFile
            self.publicAddressesOnly = publicAddressesOnly
            self.idleTimeout = idleTimeout
            self.maximumOrigins = maximumOrigins
        }
    }

    let configuration: Configuration
    let pool: HTTP2ConnectionPool
    let fallback: any HTTPTransport
    /// Whether ``shutdown()`` shuts `fallback` too (a transport of its own, in tests and
    /// tools); in the service one HTTP/1.1 transport is shared, and shut by its owner.
    let ownsFallback: Bool
    /// Origins that did not agree on `h2`: sent through `fallback`.
    let http1Origins = Mutex<Set<RequestTarget.Origin>>([])
    /// Parsed URLs (a sender uses a handful).
    let targets = Mutex<[String: RequestTarget]>([:])
    let closed = Atomic<Bool>(false)
    let logger: Logger
    /// HTTP/1.1 pinned to checked addresses (``Configuration/publicAddressesOnly``).
    let pinned: PinnedHTTP1Clients
    /// Resolves a host to one of its public addresses, or refuses (tests replace it).
    let resolvePublic: @Sendable (String, Int) async throws -> SocketAddress

    /// Answers longer than this are cut (a hostile or broken endpoint cannot exhaust memory).
    public static let maximumAnswerBytes = 1 << 20
    /// The largest header block accepted from a server.
    static let maximumHeaderListSize = 16 << 10

    /// - Parameters:
    ///   - fallback: where `http://` URLs and origins without HTTP/2 go.
    ///   - ownsFallback: whether ``shutdown()`` shuts `fallback` too; false when it is shared.
    public convenience init(
        configuration: Configuration = Configuration(), fallback: any HTTPTransport, ownsFallback: Bool = false,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, metrics: any MetricsRecorder = NoMetrics(),
        logger: Logger = Logger(label: "pushdispatch.http2")
    ) throws(TransportError) {
        // What can fail is done before any stored property exists (a throwing initializer that
        // has to destroy an `Atomic` crashed the 6.3 optimizer).
        let context = try Self.tlsContext(caFile: configuration.caFile)
        let pinned = try PinnedHTTP1Clients(caFile: configuration.caFile, idleTimeout: configuration.idleTimeout, eventLoopGroup: eventLoopGroup)
        self.init(
            configuration: configuration, tls: context, fallback: fallback, ownsFallback: ownsFallback, pinned: pinned, eventLoopGroup: eventLoopGroup,
            metrics: metrics, logger: logger)
    }

    init(
        configuration: Configuration, tls: NIOSSLContext, fallback: any HTTPTransport, ownsFallback: Bool, pinned: PinnedHTTP1Clients,
        eventLoopGroup: any EventLoopGroup, metrics: any MetricsRecorder, logger: Logger,
        resolvePublic: @escaping @Sendable (String, Int) async throws -> SocketAddress = { try await PublicAddressResolver.resolve(host: $0, port: $1) }
    ) {
        let settings = HTTP2ConnectionSettings(
            tls: tls, group: eventLoopGroup,
            connectTimeout: .milliseconds(max(1, Int64(clamping: configuration.connectTimeout.wholeMilliseconds))),
            publicAddressesOnly: configuration.publicAddressesOnly)
        self.pool = HTTP2ConnectionPool(
            settings: settings,
            configuration: .init(
                connectionsPerOrigin: configuration.connectionsPerOrigin, maximumOrigins: configuration.maximumOrigins,
                idleTimeout: .milliseconds(max(1, configuration.idleTimeout.wholeMilliseconds))),
            metrics: metrics)
        self.configuration = configuration
        self.fallback = fallback
        self.ownsFallback = ownsFallback
        self.logger = logger
        self.pinned = pinned
        self.resolvePublic = resolvePublic
    }

    /// The TLS client context: ALPN `h2` and `http/1.1`, the system's roots and `caFile`'s.
    static func tlsContext(caFile: String?) throws(TransportError) -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        // Both offered: a server without HTTP/2 refuses a handshake that offers h2 alone
        // (no_application_protocol); one that picks http/1.1 is sent through the fallback.
        tls.applicationProtocols = ["h2", "http/1.1"]
        if let caFile { tls.additionalTrustRoots = [.certificates(try HTTP1Transport.certificates(caFile))] }
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw TransportError(.configuration, "TLS: \(String(describing: error).prefix(200))")
        }
    }

    public func send(_ request: OutgoingRequest, timeout: Duration) async throws(TransportError) -> ProviderAnswer {
        guard let target = target(request.url) else { throw TransportError(.invalidURL, "the URL \(request.url.prefix(200)) is not an absolute http(s) URL") }
        if !target.secure || http1Origins.withLock({ $0.contains(target.origin) }) {
            return try await sendOverHTTP1Checked(request, target: target, timeout: timeout)
        }
        guard !closed.load(ordering: .relaxed) else { throw TransportError(.shutDown, "the transport is shut down") }
        let deadline = Self.deadline(after: timeout)
        do {
            let connection = try await pool.connection(to: target).get()
            return try await withCheckedThrowingContinuation { continuation in
                connection.exchange(request, target: target, deadline: deadline) { continuation.resume(with: $0.mapError { $0 }) }
            }
        } catch let error as HTTP2ConnectionError where error.kind == .notHTTP2 {
            return try await sendOverHTTP1(request, target: target, timeout: timeout)
        } catch {
            throw Self.transportError(error)
        }
    }

    /// Starts `request` on an HTTP/2 connection with callbacks only (no task waits for it):
    /// the answer or the error reaches `completion` on the connection's event loop. False for
    /// what goes elsewhere (`http://`, an origin without HTTP/2, a closed transport): use
    /// ``send(_:timeout:)``.
    public func start(_ request: OutgoingRequest, timeout: Duration, completion: @escaping @Sendable (Result<ProviderAnswer, TransportError>) -> Void) -> Bool {
        guard let target = target(request.url), target.secure, !closed.load(ordering: .relaxed),
            !http1Origins.withLock({ $0.contains(target.origin) })
        else { return false }
        let deadline = Self.deadline(after: timeout)
        // The answer reaches `completion` straight from the connection's handler: no future.
        let answered: @Sendable (Result<ProviderAnswer, HTTP2ConnectionError>) -> Void = { result in
            switch result {
            case .success(let answer): completion(.success(answer))
            case .failure(let error): self.failed(error, request, target: target, timeout: timeout, completion: completion)
            }
        }
        switch pool.lease(to: target) {
        case .ready(let connection):
            connection.exchange(request, target: target, deadline: deadline, completion: answered)
        case .later(let future):
            future.whenComplete { result in
                switch result {
                case .success(let connection): connection.exchange(request, target: target, deadline: deadline, completion: answered)
                case .failure(let error): self.failed(error, request, target: target, timeout: timeout, completion: completion)
                }
            }
        }
        return true
    }

    /// A request started with ``start(_:timeout:completion:)`` that got no answer: an origin
    /// without HTTP/2 is asked again over HTTP/1.1, anything else is its transport error.
    func failed(
        _ error: any Error, _ request: OutgoingRequest, target: RequestTarget, timeout: Duration,
        completion: @escaping @Sendable (Result<ProviderAnswer, TransportError>) -> Void
    ) {
        if let error = error as? HTTP2ConnectionError, error.kind == .notHTTP2 {
            Task {
                do throws(TransportError) {
                    completion(.success(try await self.sendOverHTTP1(request, target: target, timeout: timeout)))
                } catch {
                    completion(.failure(error))
                }
            }
            return
        }
        completion(.failure(Self.transportError(error)))
    }

    /// An origin found not to agree on `h2`: its requests go over HTTP/1.1 from here on.
    func sendOverHTTP1(_ request: OutgoingRequest, target: RequestTarget, timeout: Duration) async throws(TransportError) -> ProviderAnswer {
        let first = http1Origins.withLock { origins in
            // Bounded as the pool is: a name that comes and goes cannot grow the set for ever.
            if origins.count >= configuration.maximumOrigins { origins.removeAll(keepingCapacity: true) }
            return origins.insert(target.origin).inserted
        }
        if first {
            logger.notice("an origin does not speak HTTP/2 (ALPN): its requests go over HTTP/1.1", metadata: ["origin": "\(target.host.prefix(100)):\(target.port)"])
        }
        return try await sendOverHTTP1Checked(request, target: target, timeout: timeout)
    }

    /// HTTP/1.1: through `fallback`, or with ``Configuration/publicAddressesOnly`` over a
    /// connection to the public address the check found (never a second resolution).
    func sendOverHTTP1Checked(_ request: OutgoingRequest, target: RequestTarget, timeout: Duration) async throws(TransportError) -> ProviderAnswer {
        guard let address = try await checkPublic(target) else { return try await fallback.send(request, timeout: timeout) }
        guard let ip = address.ipAddress else { throw TransportError(.connect, "\(target.host.prefix(100)) resolved to no IP address") }
        return try await pinned.send(request, host: target.host, address: ip, timeout: timeout)
    }

    /// `timeout` from now, as NIO counts it.
    static func deadline(after timeout: Duration) -> NIODeadline {
        NIODeadline.now() + .nanoseconds(Int64(clamping: timeout.wholeMilliseconds) &* 1_000_000)
    }

    /// What a request's failure is to its sender: a ``TransportError`` as it is, anything else
    /// described and classified (lost in transit or not, processed or not).
    static func transportError(_ error: any Error) -> TransportError {
        switch error {
        case let error as TransportError: return error
        case let error as HTTP2ConnectionError: return error.transportError
        case let error as PublicAddressResolver.Refused: return TransportError(.refusedAddress, error.description)
        default:
            let description = describe(error)
            return isLostInTransit(error) ? TransportError(.lost, description, lostInTransit: true) : TransportError(.other, description)
        }
    }

    /// With ``Configuration/publicAddressesOnly``, refuses a target that resolves to no public
    /// address before it goes to the fallback. (The fallback resolves the name again: between
    /// the two, a name could change its answer. Only origins without HTTP/2 take this path; the
    /// HTTP/2 path connects to the address it checked.)
    /// With ``Configuration/publicAddressesOnly``, the public address to connect to (else
    /// refused); `nil` without it.
    func checkPublic(_ target: RequestTarget) async throws(TransportError) -> SocketAddress? {
        guard configuration.publicAddressesOnly else { return nil }
        do {
            return try await resolvePublic(target.host, target.port)
        } catch {
            throw Self.transportError(error)
        }
    }

    func target(_ url: String) -> RequestTarget? {
        if let known = targets.withLock({ $0[url] }) { return known }
        guard let parsed = RequestTarget(url) else { return nil }
        targets.withLock { targets in
            if targets.count >= 1_024 { targets.removeAll(keepingCapacity: true) }
            targets[url] = parsed
        }
        return parsed
    }

    /// Origins and connections held now (open, being made, or finishing their last streams).
    public var held: (origins: Int, connections: Int) { pool.held }

    /// Connections closed for being idle, and for making room for another origin, so far.
    public var closedConnections: (idle: Int, evicted: Int) {
        (pool.closedIdle.load(ordering: .relaxed), pool.evicted.load(ordering: .relaxed))
    }

    /// Closes idle connections now (the pool does it on its own timer too).
    public func closeIdleConnections() {
        pool.sweep(now: .now())
    }

    /// Closes every connection (requests in flight fail), and the fallback if it is this
    /// transport's own.
    public func shutdown() async throws {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        await pool.shutdown()
        await pinned.shutdown()
        if ownsFallback { try await fallback.shutdown() }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as HTTP2ConnectionError: return error.description
        case let error as PublicAddressResolver.Refused: return error.description
        case let error as NIOHTTP2Errors.StreamClosed: return "HTTP/2: the stream was closed (\(error.errorCode))"
        case let error as NIOSSLError: return "TLS: \(error)"
        case let error as IOError: return "connection: \(error.description)"
        default: return "transport: \(String(describing: error).prefix(200))"
        }
    }

    /// Whether `error` means the connection or stream went away under the request: resent at
    /// once. A refused connection or a failed handshake is not (the back-off waits).
    static func isLostInTransit(_ error: any Error) -> Bool {
        switch error {
        case let error as HTTP2ConnectionError: return error.kind == .lost
        case is NIOHTTP2Errors.StreamClosed, is NIOHTTP2Errors.CreatedStreamAfterGoaway, is NIOHTTP2Errors.IOOnClosedConnection: return true
        case let error as ChannelError: return error == .ioOnClosedChannel || error == .eof || error == .outputClosed || error == .alreadyClosed
        case let error as IOError: return error.errnoCode == ECONNRESET || error.errnoCode == EPIPE
        case let error as NIOSSLError: return error == .uncleanShutdown
        default: return false
        }
    }
}
