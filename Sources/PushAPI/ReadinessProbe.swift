import PushCore
import PushJSON

/// Whether the service is ready to be sent traffic (`/readyz`).
public protocol ReadinessProbe: Sendable {
    /// `nil` when ready; else why not, as a JSON object (`/readyz` answers it with 503).
    func problem() async -> JSON?
}

/// Always ready (an API served alone, in tests).
public struct AlwaysReady: ReadinessProbe {
    public init() {}
    public func problem() async -> JSON? { nil }
}
