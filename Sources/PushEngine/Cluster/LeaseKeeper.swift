import Logging
import PushCore
import PushContracts
import ServiceLifecycle
import Synchronization

/// Where other instances reach this one (`host:port` of its HTTP API), as the heartbeat
/// publishes it: the configured address until the server listens, then the port it listens on.
public final class AdvertisedAddress: Sendable {
    private let value: Mutex<String>

    public init(_ address: String) {
        value = Mutex(address)
    }

    public var current: String { value.withLock { $0 } }

    /// The server listens: this is where it can be reached.
    public func listening(at address: String) { value.withLock { $0 = address } }
}

/// Holds this instance's share of the applications: renews its leases every round, takes free
/// ones (no lease, or an expired one: its holder died) up to a fair share of the live
/// instances, gives one back per round when it holds more than its share. Which instance
/// prefers which application is fixed (rendezvous hashing), so shares settle without talk.
public final class LeaseKeeper: Service, Sendable {
    let store: any ClusterStore
    public let instance: String
    let address: AdvertisedAddress
    /// The applications to share: the configured ones; those with waiting records are added.
    let applications: [String]
    /// Woken when the set of held leases changed (the owner).
    let changed: Wakeup
    /// Told after every round: claims of others may have expired or been released meanwhile.
    let outbox: any OutboxListener
    /// Extended by every heartbeat written: the delivery worker's claims are surely its own
    /// until then.
    let tenure: ClaimTenure
    /// Set to the live instances each round: they share the senders' rate budgets.
    let share: InstanceShare
    let clock: any ServiceClock
    /// What this instance publishes with its heartbeat for the others' operations overview
    /// (``InstanceReport``).
    let report: @Sendable () -> [UInt8]?
    let logger: Logger
    let held = Mutex<[String: Int64]>([:])
    /// Stopping: the leases were given back; only the heartbeat goes on.
    let retiring = Atomic<Bool>(false)

    public init(
        store: any ClusterStore, instance: String, address: AdvertisedAddress, applications: [String], changed: Wakeup, outbox: any OutboxListener,
        tenure: ClaimTenure = ClaimTenure(), share: InstanceShare = InstanceShare(), clock: any ServiceClock,
        report: @escaping @Sendable () -> [UInt8]? = { nil }, logger: Logger
    ) {
        self.tenure = tenure
        self.share = share
        self.report = report
        self.store = store
        self.instance = instance
        self.address = address
        self.applications = applications
        self.changed = changed
        self.outbox = outbox
        self.clock = clock
        self.logger = logger
    }

    /// The leases held now: application → fencing token.
    public var leases: [String: Int64] { held.withLock { $0 } }

    /// Forgets a lease the store said was lost.
    func lost(_ app: String) {
        held.withLock { _ = $0.removeValue(forKey: app) }
        logger.warning("application lease lost to another instance", metadata: ["app": "\(app)"])
    }

    /// Runs until the service stops; it is stopped last (after the delivery worker), so that its
    /// heartbeat keeps the claims of the last sends alive until they are answered.
    ///
    /// The heartbeat also beats on a timer of its own, beside the rounds: a round that takes
    /// long (a slow link to the database, a takeover waiting on a lease row) must not let the
    /// instance look dead to the others, nor let its delivery claims' tenure lapse.
    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.beat() }
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                do {
                    try await round()
                } catch {
                    logger.error("application leases could not be renewed", metadata: ["error": "\(error)"])
                }
                guard await pause(SharedInstances.round, on: clock) else { break }
            }
            await releaseAll()
            // No heartbeat after this instance is forgotten (a heartbeat would write it back).
            group.cancelAll()
        }
        try? await store.forget(instance: instance)
    }

    /// A heartbeat and a renewal of the leases held every round, whatever the rounds do: each
    /// heartbeat extends the claims' tenure, and a lease renewed on its own timer does not lapse
    /// while a slow round (six queries and more over a slow, lossy link, a takeover waiting on
    /// a locked row) takes longer than the lease (issue 33: the leases of an instance on such a
    /// link moved back and forth between instances, each taking one reloading its tree, and its
    /// records waited minutes).
    func beat() async {
        while await pause(SharedInstances.round, on: clock), !Task.isCancelled {
            try? await heartbeat()
            try? await renew()
        }
    }

    /// Renews the leases held; forgets those found lost (the owner stops processing them).
    func renew() async throws {
        if retiring.load(ordering: .acquiring) { return }
        let renewed = try await store.renewLeases(holder: instance, ttl: SharedInstances.leaseTTL)
        let lost = held.withLock { held -> [String] in
            let gone = held.filter { renewed[$0.key] != $0.value }.map(\.key)
            for app in gone { held[app] = nil }
            return gone
        }
        guard !lost.isEmpty else { return }
        for app in lost.sorted() {
            logger.warning("application lease lost to another instance", metadata: ["app": "\(app)"])
        }
        changed.signal()
    }

    /// Writes the heartbeat (with this instance's report); returns the database's time.
    @discardableResult
    func heartbeat() async throws -> Int64 {
        let sentAt = clock.now
        let now = try await store.heartbeat(instance: instance, address: address.current, report: report())
        tenure.heartbeat(sentAt: sentAt)
        return now
    }

    /// One round: heartbeat, renew, balance.
    func round() async throws {
        let now = try await heartbeat()
        if retiring.load(ordering: .acquiring) { return }
        var leases = try await store.renewLeases(holder: instance, ttl: SharedInstances.leaseTTL)
        let alive = try await store.instances(within: SharedInstances.leaseTTL).map(\.name)
        share.set(instances: alive.count)
        let all = try await store.leases()
        // Configured applications, those with waiting records, those someone holds now.
        let apps = Set(applications).union(try await store.inboxApplications()).union(all.filter { $0.expiresAt > now }.map(\.app))
        let share = (apps.count + max(1, alive.count) - 1) / max(1, alive.count)
        // Too many: give back the least preferred one (another instance takes it next round).
        if leases.count > share, let app = leases.keys.min(by: { preference($0) < preference($1) }) {
            try await store.releaseLease(app: app, holder: instance)
            leases[app] = nil
            logger.info("application handed over for balance", metadata: ["app": "\(app)", "share": "\(share)"])
        }
        let taken = Set(all.filter { $0.expiresAt > now }.map(\.app))
        for app in apps.subtracting(taken).subtracting(leases.keys).sorted(by: { preference($0) > preference($1) }) where leases.count < share {
            if let token = try await store.acquireLease(app: app, holder: instance, ttl: SharedInstances.leaseTTL) {
                leases[app] = token
                logger.info("application taken over", metadata: ["app": "\(app)", "token": "\(token)"])
            }
        }
        let before = held.withLock { held in
            defer { held = leases }
            return held
        }
        if before != leases { changed.signal() }
        // A dead instance's claims go with its leases (it is stale after the lease time).
        let released = try await store.releaseClaimsOfStaleInstances(staleAfter: SharedInstances.staleAfter)
        if released > 0 {
            logger.warning("delivery claims of a dead instance released", metadata: ["count": "\(released)"])
            await store.signal(.outbox)
        }
        outbox.outboxChanged()
    }

    /// Gives every lease back (a graceful stop, once processing stopped): the others take the
    /// applications over at their next round instead of after the expiry.
    func releaseAll() async {
        guard !retiring.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // Out of the shares first, so that the others take the applications at their next round.
        try? await store.retire(instance: instance)
        for app in held.withLock({ Array($0.keys) }) {
            try? await store.releaseLease(app: app, holder: instance)
        }
        held.withLock { $0 = [:] }
    }

    /// How much this instance wants `app` (rendezvous hashing: FNV-1a of both names).
    func preference(_ app: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in app.utf8 + [0] + instance.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return hash
    }
}
