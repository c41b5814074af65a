/// The timing of several instances sharing one PostgreSQL database (docs/scaling-out.md): every
/// instance takes records from its own sources into the shared inbox (``InboxIntake``); each
/// application's records are processed by the one instance holding its lease
/// (``LeaseKeeper``, ``ApplicationOwner``); delivery is shared through the outbox's claims;
/// signals wake whoever has work (``ClusterListener``, ``SharedOutbox``).
public enum SharedInstances {
    /// How long a lease lasts without renewal: an instance that dies loses its applications
    /// after at most this (milliseconds), and the others take them at their next round.
    public static let leaseTTL: Int64 = 5_000
    /// How often leases are renewed and free applications looked for.
    public static let round = Duration.seconds(1)
    /// An instance silent for this long (milliseconds) is dead: its delivery claims are released.
    public static let staleAfter: Int64 = 15_000

    /// The source's name in the shared database: with its instance's (`node-1/socket`).
    public static func sourceKey(instance: String, source: String) -> String { "\(instance)/\(source)" }
}
