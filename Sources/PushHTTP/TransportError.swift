/// Why a request got no answer: all of them are worth a retry (SPEC §8: connection errors and
/// timeouts); the request may or may not have reached the server.
///
/// Compared by ``kind``; the description says what happened, with the host and port where it
/// helps, never a header or a body.
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, as a closed set of reasons (a metric label each).
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Code: String {
            case invalidURL = "invalid_url"
            case shutDown = "shut_down"
            case connect
            case refusedAddress = "refused_address"
            case lost
            case timeout
            case tooManyOrigins = "too_many_origins"
            case configuration
            case other
        }

        private let code: Code

        private init(_ code: Code) { self.code = code }

        /// The URL is not an absolute `http(s)` URL the transport can use.
        public static let invalidURL = Kind(.invalidURL)
        /// The transport was shut down.
        public static let shutDown = Kind(.shutDown)
        /// No connection: refused, unreachable, the TLS handshake failed or took too long.
        public static let connect = Kind(.connect)
        /// The host resolves to no address a request built from outside input may reach.
        public static let refusedAddress = Kind(.refusedAddress)
        /// The connection or the stream went away under the request.
        public static let lost = Kind(.lost)
        /// No answer within the request's deadline.
        public static let timeout = Kind(.timeout)
        /// Every origin the transport may hold is busy: a new one waits for a place.
        public static let tooManyOrigins = Kind(.tooManyOrigins)
        /// The transport cannot be built as configured (an unreadable CA file).
        public static let configuration = Kind(.configuration)
        /// Anything else the HTTP stack reported.
        public static let other = Kind(.other)

        /// The metric label.
        public var description: String { code.rawValue }
    }

    public var kind: Kind
    public var description: String
    /// The connection or stream went away under a sent request (a reset, a GOAWAY, a close
    /// before the answer): the request is resent at once rather than after a back-off.
    public var lostInTransit: Bool
    /// Lost before the server processed it (HTTP/2: a stream above a GOAWAY's last one,
    /// `REFUSED_STREAM`, or never written out): a resend cannot make a duplicate.
    public var unprocessed: Bool

    public init(_ kind: Kind, _ description: String, lostInTransit: Bool = false, unprocessed: Bool = false) {
        self.kind = kind
        self.description = description
        self.lostInTransit = lostInTransit || unprocessed
        self.unprocessed = unprocessed
    }

    public static func == (lhs: TransportError, rhs: TransportError) -> Bool { lhs.kind == rhs.kind }
}
