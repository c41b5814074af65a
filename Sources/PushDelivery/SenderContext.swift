import PushCore
import PushHTTP

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
    /// `firstLoss`: the request was sent once already (``start(_:provider:completion:)``) and
    /// lost so; it counts against the budget.
    func send(_ request: OutgoingRequest, provider: Provider, firstLoss: TransportError? = nil) async throws(TransportError) -> ProviderAnswer {
        var resends = 0
        var unprocessedResends = 0
        var loss = firstLoss
        while true {
            if let error = loss {
                guard error.lostInTransit, !Task.isCancelled else { throw error }
                if error.unprocessed, unprocessedResends < Self.unprocessedResends {
                    unprocessedResends += 1
                } else if resends < Self.immediateResends {
                    resends += 1
                } else {
                    throw error
                }
                counters?.resent(provider: provider.label)
            }
            do {
                return try await transport.send(request, timeout: timeout)
            } catch {
                loss = error
            }
        }
    }

    /// Starts `request` without a task when the transport can (see
    /// ``HTTPTransport/start(_:timeout:completion:)``); a loss in transit goes on in a task
    /// through ``send(_:provider:firstLoss:)``, so the resends are the same.
    func start(_ request: OutgoingRequest, provider: Provider, completion: @escaping @Sendable (Result<ProviderAnswer, TransportError>) -> Void) -> Bool {
        transport.start(request, timeout: timeout) { result in
            guard case .failure(let error) = result, error.lostInTransit else {
                completion(result)
                return
            }
            Task {
                do throws(TransportError) {
                    completion(.success(try await self.send(request, provider: provider, firstLoss: error)))
                } catch {
                    completion(.failure(error))
                }
            }
        }
    }
}
