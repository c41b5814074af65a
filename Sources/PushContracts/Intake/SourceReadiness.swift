import PushCore
import PushJSON

/// Told when a source is attached (its file followed, its socket listening): readiness waits
/// for every configured source.
public protocol SourceReadiness: Sendable {
    func attached(_ source: String)
    /// The source cannot take records in, and why (`nil`: it can again); readiness says it.
    func failing(_ source: String, reason: String?)
}

/// Tells nobody.
public struct NoReadiness: SourceReadiness {
    public init() {}
    public func attached(_ source: String) {}
    public func failing(_ source: String, reason: String?) {}
}
