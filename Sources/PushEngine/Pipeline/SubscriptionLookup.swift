import PushCore
import PushJSON
import PushMatching

/// Where the record pipeline finds subscriptions: the in-memory index, kept in step with the
/// store (the service's registry, or the subscriptions `replay` reads). Staging reads it and
/// changes nothing: what records do to it comes back as ``IndexEffects``, applied once their
/// batch committed.
public protocol SubscriptionLookup: Sendable {
    /// The subscriptions a write at (app, path) concerns: at, above and below the path
    /// (SPEC §6).
    func concerned(app: String, path: Path) -> [IndexMatch]

    /// The subscriptions at or below `path`.
    func under(app: String, path: Path) -> [IndexMatch]

    // Read access (SPEC §12.5): see ``AccessIndex``.

    /// The admitted subscriptions whose access evaluation read a value a write at `path` may
    /// have changed.
    func accessAffected(app: String, path: Path) -> [Int64]

    /// What an admitted subscription's evaluation depended on.
    func accessEntry(_ handle: Int64) -> AccessIndex.Entry?

    /// Whether a subscription's access was evaluated against the data it now sees.
    func isAdmitted(_ handle: Int64) -> Bool

    /// Applies what staged records did (``IndexEffects``), once their batch committed: the
    /// subscriptions they revoked are forgotten (their read access too), the admissions
    /// recorded.
    func apply(_ effects: IndexEffects)
}
