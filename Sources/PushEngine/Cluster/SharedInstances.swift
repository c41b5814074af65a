import PushCore
import PushContracts

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
    /// An instance silent for this long (milliseconds) is dead: its delivery claims are released
    /// (as its leases expire: the lease time).
    public static let staleAfter: Int64 = leaseTTL

    /// A source's checkpoint key in a PostgreSQL database. The socket carries the database's
    /// stream, whichever instance a client reaches: `socket`, shared by every instance, so that
    /// a `seq` accepted through one is not applied again through another. A queue file is a
    /// file of one machine: filed under `machine` (the pinned `instance.name`, else the host
    /// name), `node-1/queue-file`.
    public static func sourceKey(source: String, machine: String) -> String {
        source == "socket" ? source : "\(machine)/\(source)"
    }

    /// Waits until no live instance holds `name`: a name is one instance's at a time (its
    /// claims, its leases). A row whose heartbeat is older than the lease is a dead instance's;
    /// a retiring one (a graceful stop finishing its sends) is waited for, up to `retiringWait`;
    /// a recent heartbeat is watched for a moment (`watch`): one that moves on is a live
    /// instance, and this start is refused.
    public static func claimName(
        _ name: String, store: any ClusterStore, watch: Duration = .milliseconds(2_500), retiringWait: Duration = .seconds(30)
    ) async throws {
        var waited = Duration.zero
        while let state = try await store.instanceState(named: name), state.now - state.heartbeatAt <= leaseTTL {
            if state.retiring && waited < retiringWait {
                try await Task.sleep(for: .seconds(1))
                waited += .seconds(1)
                continue
            }
            try await Task.sleep(for: watch)
            guard let again = try await store.instanceState(named: name), again.heartbeatAt > state.heartbeatAt else { return }
            throw NameInUse(name: name, address: again.address, retiring: again.retiring)
        }
    }

    /// `instance.name` is held by a live instance.
    public struct NameInUse: Error, CustomStringConvertible {
        public var name: String
        public var address: String
        public var retiring: Bool

        public var description: String {
            "instance.name \(name) is held by a live instance (at \(address)\(retiring ? ", still stopping" : "")): its leases and delivery "
                + "claims are its own. Give this instance another instance.name, or leave it unset for a name of this process's own"
        }
    }
}
