import PushJSON

/// Turns the event JSON into the JOSE compact serialisation carried in `evt` (SPEC §7.3):
/// a JWS, or a JWE. Implemented by PushJOSE; the core only needs the result's length.
public protocol EventSealer: Sendable {
    /// The key id written as the payload's `kid` field: the encryption key's id when the event
    /// is encrypted, `nil` when it is only signed.
    var payloadKeyID: String? { get }

    /// Seals the event JSON; returns the compact serialisation (ASCII).
    func seal(_ eventJSON: [UInt8]) throws -> [UInt8]

    /// The exact length `seal` will return for an event of `eventLength` bytes, when it is
    /// known in advance (it is for every JOSE algorithm we use); `nil` otherwise. Lets the
    /// size rule pick the status before sealing, so an event is sealed once.
    func sealedLength(eventLength: Int) -> Int?
}

extension EventSealer {
    public func sealedLength(eventLength: Int) -> Int? { nil }
}
