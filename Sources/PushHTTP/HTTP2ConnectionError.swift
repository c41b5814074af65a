/// Why an HTTP/2 connection could not carry a request (turned into a ``TransportError`` by
/// ``HTTP2Transport``).
struct HTTP2ConnectionError: Error, Equatable, CustomStringConvertible {
    enum Kind: Equatable {
        /// TLS agreed on another protocol than `h2`: the origin goes to the HTTP/1.1 transport.
        case notHTTP2
        case connect
        case lost
        case timeout
        case tooManyOrigins
        case shutDown
        /// A field the request was given cannot be carried (RFC 9113 §8.2): never written.
        case invalidRequest
    }

    var kind: Kind
    var description: String
    /// Lost before the server processed it (GOAWAY above the last stream it processed,
    /// `REFUSED_STREAM`, or never written): resending it cannot make a duplicate.
    var unprocessed = false

    static func lost(_ what: String, unprocessed: Bool = false) -> HTTP2ConnectionError {
        HTTP2ConnectionError(kind: .lost, description: "HTTP/2: " + what, unprocessed: unprocessed)
    }

    var transportError: TransportError {
        switch kind {
        case .notHTTP2, .connect: TransportError(.connect, description)
        case .lost: TransportError(.lost, description, lostInTransit: true, unprocessed: unprocessed)
        case .timeout: TransportError(.timeout, description)
        case .tooManyOrigins: TransportError(.tooManyOrigins, description)
        case .shutDown: TransportError(.shutDown, description)
        case .invalidRequest: TransportError(.other, description)
        }
    }
}
