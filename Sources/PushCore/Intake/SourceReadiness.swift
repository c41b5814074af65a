/// Told when a source is attached (its file followed, its socket listening): readiness waits
/// for every configured source.
public protocol SourceReadiness: Sendable {
    func attached(_ source: String)
}

/// Tells nobody.
public struct NoReadiness: SourceReadiness {
    public init() {}
    public func attached(_ source: String) {}
}
