import Synchronization

/// How many instances share each sender's rate budget: each one paces at its share (issue 34).
/// Alone on its store, one. Among several on one PostgreSQL database, the lease keeper sets the
/// live instances it counts each round, so shares follow instances as they come and go, as the
/// applications' leases do.
public final class InstanceShare: Sendable {
    private let count = Atomic<Int>(1)

    public init() {}

    /// The instances sharing each budget (at least one).
    public var instances: Int { count.load(ordering: .relaxed) }

    /// The live instances counted now.
    public func set(instances: Int) { count.store(max(1, instances), ordering: .relaxed) }
}
