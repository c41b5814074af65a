import PushCore

/// What senders share: the transport, the request deadline, the clock.
public struct SenderContext: Sendable {
    public var transport: any HTTPTransport
    public var timeout: Duration
    /// What answers are dated by (`Retry-After`, token lifetimes, webhook timestamps).
    public var clock: any ServiceClock
    /// Where resends of requests lost in transit are counted.
    public var counters: DeliveryCounters?
    /// How many times a request lost in transit (reset, GOAWAY) is resent at once before the
    /// loss counts as a failed attempt with its back-off.
    public static let immediateResends = 2

    public init(transport: any HTTPTransport, timeout: Duration, clock: any ServiceClock, counters: DeliveryCounters? = nil) {
        self.transport = transport
        self.timeout = timeout
        self.clock = clock
        self.counters = counters
    }

    /// Sends `request`; a request lost in transit is resent at once, up to
    /// ``immediateResends`` times (a refused stream was never processed; a reset one may have
    /// been: at-least-once, as for any retry).
    func send(_ request: OutgoingRequest, provider: String) async throws(TransportError) -> ProviderAnswer {
        var resends = 0
        while true {
            do {
                return try await transport.send(request, timeout: timeout)
            } catch {
                guard error.lostInTransit, resends < Self.immediateResends, !Task.isCancelled else { throw error }
                resends += 1
                counters?.resent(provider: provider)
            }
        }
    }
}
