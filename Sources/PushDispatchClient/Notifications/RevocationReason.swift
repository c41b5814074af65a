/// Why the service ended a subscription (the reason of a `revoke` notification).
public enum RevocationReason: Sendable, Hashable, CustomStringConvertible {
    /// The read rules no longer let the user read the node.
    case permissionDenied
    /// The application's data no longer exists.
    case namespaceDoesNotExist
    /// The application was disabled.
    case disabled
    /// The subscription reached its expiration: subscribe again to go on.
    case expired
    /// The node's value outgrew the application's limit.
    case tooBig
    /// The push provider refused the deliveries.
    case deliveryRejected
    /// A reason this version of the library does not know, as the service wrote it.
    case unknown(String)

    /// The reason from its text (`permission_denied`).
    public init(_ text: String) {
        switch text {
        case "permission_denied": self = .permissionDenied
        case "namespace_does_not_exist": self = .namespaceDoesNotExist
        case "disabled": self = .disabled
        case "expired": self = .expired
        case "too_big": self = .tooBig
        case "delivery_rejected": self = .deliveryRejected
        default: self = .unknown(text)
        }
    }

    /// The reason's text, as the service writes it.
    public var description: String {
        switch self {
        case .permissionDenied: return "permission_denied"
        case .namespaceDoesNotExist: return "namespace_does_not_exist"
        case .disabled: return "disabled"
        case .expired: return "expired"
        case .tooBig: return "too_big"
        case .deliveryRejected: return "delivery_rejected"
        case .unknown(let text): return text
        }
    }
}
