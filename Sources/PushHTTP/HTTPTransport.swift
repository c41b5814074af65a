/// Sends HTTP requests: ``HTTP2Transport`` (with ``HTTP1Transport`` behind it) in the service,
/// anything in tests.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and reads the answer (status, `Retry-After`, body up to a bound), or
    /// throws ``TransportError``.
    func send(_ request: OutgoingRequest, timeout: Duration) async throws(TransportError) -> ProviderAnswer
    /// Starts `request` without a task when the transport can: `completion` gets the answer
    /// or the error (on any thread), and the call returns true; false: nothing was started, use
    /// ``send(_:timeout:)``. The default starts nothing.
    func start(_ request: OutgoingRequest, timeout: Duration, completion: @escaping @Sendable (Result<ProviderAnswer, TransportError>) -> Void) -> Bool
    /// Closes the connections (an async-http-client must be, before the process ends).
    /// Calling it again does nothing.
    func shutdown() async throws
}

extension HTTPTransport {
    public func start(_ request: OutgoingRequest, timeout: Duration, completion: @escaping @Sendable (Result<ProviderAnswer, TransportError>) -> Void) -> Bool {
        false
    }

    public func shutdown() async throws {}
}
