/// Makes the sealer of a v2 subscription's `evt`: its application's signing key (or the
/// service's own), and its `encryption`. Implemented with PushJOSE.
public protocol SealerProvider: Sendable {
    func sealer(for subscription: Subscription) throws -> any EventSealer
}
