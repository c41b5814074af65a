import PushCore
import PushJSON

/// The work of `pushdispatch payload` for one line: request JSON in, data payload out, or an
/// `{"error":"…"}` line. Pure; the command does the reading and writing.
public struct PayloadLineProcessor {
    /// Makes the JOSE sealer for a v2 request; `nil` when v2 is not available.
    public typealias SealerFactory = (PayloadRequest) throws -> any EventSealer

    private let v1 = V1PayloadBuilder()
    private var v2 = V2PayloadBuilder()
    private let makeSealer: SealerFactory?

    public init(makeSealer: SealerFactory? = nil) {
        self.makeSealer = makeSealer
    }

    /// Appends the output for one request line (without a newline) to `out`; returns `false`
    /// when the line failed and an error line was written instead.
    public mutating func process(line: UnsafeBufferPointer<UInt8>, into out: inout JSONWriter) -> Bool {
        let start = out.count
        do {
            let json: JSON
            do {
                json = try JSONParser.parse(line)
            } catch {
                throw RequestError(.undecodable, error.description)
            }
            let request = try PayloadRequest.decode(json)
            switch request.format {
            case .v1:
                v1.build(request.event, into: &out)
            case .v2:
                guard let makeSealer else {
                    throw RequestError(.notConfigured, "format v2 needs JOSE signing keys; pass --keys with a JWK Set")
                }
                let sealer = try makeSealer(request)
                try v2.build(request.event, sealer: sealer, into: &out)
            }
            return true
        } catch {
            out.truncate(to: start)
            out.raw("{\"error\":")
            out.writeString(String(describing: error))
            out.raw("}")
            return false
        }
    }
}
