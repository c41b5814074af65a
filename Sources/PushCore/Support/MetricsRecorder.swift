/// Where the service's counts and durations go (SPEC §11.13 names and labels). The service
/// records them through swift-metrics into its Prometheus registry; tools and tests pass
/// ``NoMetrics`` and read the in-memory counts the parts keep themselves.
///
/// The core names the seam so that every part (ingestion, expiry, delivery) counts without
/// depending on a metrics library, nor on each other.
public protocol MetricsRecorder: Sendable {
    /// Adds `by` to the counter `name{labels}` (0 makes it appear with 0).
    func increment(_ name: String, _ labels: [(String, String)], by: Int)
    /// Records a duration (milliseconds, clamped at 0) in the histogram `name{labels}`.
    func record(_ name: String, _ labels: [(String, String)], milliseconds: Int64)
    /// Moves the gauge `name{labels}` by `by` (negative lowers it): what is held now.
    func adjust(_ name: String, _ labels: [(String, String)], by: Int)
}

extension MetricsRecorder {
    public func adjust(_ name: String, _ labels: [(String, String)], by: Int) {}

    public func increment(_ name: String, _ labels: [(String, String)] = []) {
        increment(name, labels, by: 1)
    }
}

/// Records nothing.
public struct NoMetrics: MetricsRecorder {
    public init() {}
    public func increment(_ name: String, _ labels: [(String, String)], by: Int) {}
    public func record(_ name: String, _ labels: [(String, String)], milliseconds: Int64) {}
}
