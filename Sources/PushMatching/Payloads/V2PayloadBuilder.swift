import PushCore
import PushJSON

/// Builds v2 data payloads (SPEC §7.3): `{"srv":"webcom",("kid":K,)"evt":E,"ver":"v2"}`, with
/// the size rule of §7.4 applied to the final, sealed length.
public struct V2PayloadBuilder: Sendable {
    private var eventScratch = JSONWriter(capacity: 4096)
    private let limit: Int

    public init(limit: Int = PayloadLimit.bytes) {
        self.limit = limit
    }

    /// Appends the data payload of `event` to `out`; returns the status chosen (`nil` for
    /// noData and revocations).
    @discardableResult
    public mutating func build(_ event: Event, sealer: some EventSealer, into out: inout JSONWriter, limit: Int? = nil) throws
        -> PayloadStatus?
    {
        let limit = limit ?? self.limit
        let start = out.count
        let statuses = EventWriter.statuses(for: event)
        // {"srv":"webcom",("kid":K,)"evt":"…","ver":"v2"} around the token.
        var shell = 36
        if let kid = sealer.payloadKeyID {
            var writer = JSONWriter(capacity: 32)
            writer.writeString(kid)
            shell += 7 + writer.count
        }
        for (index, status) in statuses.enumerated() {
            let isLast = index == statuses.count - 1
            eventScratch.removeAll()
            EventWriter.write(event, status: status, into: &eventScratch)
            let predicted = sealer.sealedLength(eventLength: eventScratch.count).map { $0 + shell }
            if let predicted, predicted >= limit, !isLast {
                continue  // Too long whatever the token holds: try the smaller form.
            }
            let token = try sealer.seal(eventScratch.bytes)
            out.raw("{\"srv\":\"webcom\"")
            if let kid = sealer.payloadKeyID {
                out.raw(",\"kid\":")
                out.writeString(kid)
            }
            out.raw(",\"evt\":\"")
            out.raw(token)
            out.raw("\",\"ver\":\"v2\"}")
            assert(predicted == nil || predicted == out.count - start, "sealedLength mispredicted the token length")
            if out.count - start < limit || isLast {
                return event.mode == nil || event.mode == .noData ? nil : status
            }
            out.truncate(to: start)
        }
        preconditionFailure("unreachable: the last status always returns")
    }
}
