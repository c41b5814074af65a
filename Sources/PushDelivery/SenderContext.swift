import PushCore

/// What senders share: the transport, the request deadline, the clock.
public struct SenderContext: Sendable {
    public var transport: any HTTPTransport
    public var timeout: Duration
    /// What answers are dated by (`Retry-After`, token lifetimes, webhook timestamps).
    public var clock: any ServiceClock
    /// Where resends of requests lost in transit are counted.
    public var counters: DeliveryCounters?
    /// How many times a request lost in transit (a reset, a close before the answer) is resent
    /// at once before the loss counts as a failed attempt with its back-off.
    public static let immediateResends = 2
    /// How many times a request the server never processed (above a GOAWAY's last stream,
    /// refused) is resent at once, besides: connections to one host tend to reach a server's
    /// requests-per-connection limit together, so a resend can meet the next GOAWAY; it
    /// cannot make a duplicate.
    public static let unprocessedResends = 8

    public init(transport: any HTTPTransport, timeout: Duration, clock: any ServiceClock, counters: DeliveryCounters? = nil) {
        self.transport = transport
        self.timeout = timeout
        self.clock = clock
        self.counters = counters
    }

    /// Sends `request`; a request lost in transit is resent at once, up to
    /// ``immediateResends`` times (a reset one may have been processed: at-least-once, as for
    /// any retry), and one the server never processed up to ``unprocessedResends`` times more.
    func send(_ request: OutgoingRequest, provider: String) async throws(TransportError) -> ProviderAnswer {
        var resends = 0
        var unprocessedResends = 0
        while true {
            do {
                return try await transport.send(request, timeout: timeout)
            } catch {
                guard error.lostInTransit, !Task.isCancelled else { throw error }
                if error.unprocessed, unprocessedResends < Self.unprocessedResends {
                    unprocessedResends += 1
                } else if resends < Self.immediateResends {
                    resends += 1
                } else {
                    throw error
                }
                counters?.resent(provider: provider)
            }
        }
    }
}
