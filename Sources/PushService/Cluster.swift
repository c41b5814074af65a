import Foundation
import Logging
import PushCore
import PushIngest
import PushStore
import ServiceLifecycle
import Synchronization

/// Several instances on one PostgreSQL database (docs/scaling-out.md): every instance takes
/// records from its own sources into the shared inbox (``InboxIntake``); each application's
/// records are processed by the one instance holding its lease (``LeaseKeeper``,
/// ``ApplicationOwner``); delivery is shared through the outbox's claims; LISTEN/NOTIFY wakes
/// whoever has work (``ClusterListener``).
enum Cluster {
    /// How long a lease lasts without renewal: an instance that dies loses its applications
    /// after at most this, and the others take them at their next round.
    static let leaseTTL: Int64 = 5_000
    /// How often leases are renewed and free applications looked for.
    static let round = Duration.seconds(1)
    /// An instance silent for this long is dead: its delivery claims are released.
    static let staleAfter: Int64 = 15_000

    /// The source's name in the shared database: with its instance's (`node-1/socket`).
    static func sourceKey(instance: String, source: String) -> String { "\(instance)/\(source)" }
}

/// A wake-up signal: `signal()` from anywhere, `wait(upTo:)` in one consumer. Signals while
/// nobody waits are kept (one is enough).
final class Wakeup: Sendable {
    let stream: AsyncStream<Void>
    let continuation: AsyncStream<Void>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func signal() { continuation.yield() }

    /// Returns at the next signal, or after `timeout`, or at cancellation.
    func wait(upTo timeout: Duration) async {
        let stream = self.stream
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in stream { return }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }
}

/// Takes lines from this instance's sources into the shared inbox: each line is checked as far
/// as it can be without the tree (a JSON record; its `seq` after its source's last), the
/// accepted ones are stored with the sources' checkpoints in one transaction, the refused ones
/// dead-lettered; socket clients are answered once the transaction committed, so what was
/// acknowledged survives this instance.
struct InboxIntake: Service {
    let queue: IngestQueue
    let store: any ClusterStore
    let deadLetters: DeadLetterFile
    let instance: String
    /// The last accepted seq of each of this instance's sources (by source key).
    let initialWatermarks: [String: Int64]
    let maxLineBytes: Int
    let counters: IngestCounters
    let now: @Sendable () -> Int64
    let logger: Logger
    var batchLines = 2_000

    func run() async throws {
        try await withGracefulShutdownHandler {
            var watermarks = initialWatermarks
            while true {
                let lines = await queue.receive(limit: batchLines)
                if lines.isEmpty { break }  // finished and drained
                try await take(lines, &watermarks)
            }
        } onGracefulShutdown: {
            queue.finish()
        }
    }

    func take(_ lines: [IngestLine], _ watermarks: inout [String: Int64]) async throws {
        let time = now()
        var records: [InboxRecord] = []
        var letters: [DeadLetter] = []
        var answers: [(IngestAck, AckResult)] = []
        var positions: [String: (position: Int64, identity: String?)] = [:]
        var counts = IngestCounters.Batch()
        for line in lines {
            let key = Cluster.sourceKey(instance: instance, source: line.source)
            positions[key] = (line.resumePosition, line.fileIdentity)
            let record: ChangeRecord
            do {
                if let length = line.overflow {
                    throw RecordError("the line is \(length) bytes; a record is at most \(maxLineBytes) bytes")
                }
                record = try ChangeRecord.parse(line.bytes)
                if let error = RecordPipeline.sequenceError(record.seq, after: watermarks[key]) { throw error }
            } catch let error as RecordError {
                counts.rejected[IngestCounters.reasonLabel(error.reason), default: 0] += 1
                letters.append(DeadLetter(timestamp: time, source: line.source, position: line.position, reason: error.reason, line: line.bytes))
                if let ack = line.ack { answers.append((ack, .rejected(seq: error.seq, reason: error.reason))) }
                continue
            }
            watermarks[key] = record.seq
            counts.ingested[line.source, default: 0] += 1
            records.append(InboxRecord(app: record.app, source: key, position: line.position, line: line.bytes))
            if let ack = line.ack { answers.append((ack, .accepted(seq: record.seq))) }
        }
        let checkpoints = positions.sorted { $0.key < $1.key }.map { key, position in
            SourceCheckpoint(source: key, lastSeq: watermarks[key], position: position.position, fileIdentity: position.identity)
        }
        try await retrying("writing the dead-letter file") { try deadLetters.append(letters) }
        if !letters.isEmpty {
            logger.warning("change records rejected; see the dead-letter file", metadata: ["count": "\(letters.count)", "file": "\(deadLetters.path)"])
        }
        try await retrying("storing records in the inbox") { try await store.enqueue(records, checkpoints: checkpoints) }
        counters.committed(counts)
        for (ack, answer) in answers { ack.complete(answer) }
    }

    func retrying<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        try await retryingIngestion(what, logger: logger, body)
    }
}

/// Holds this instance's share of the applications: renews its leases every round, takes free
/// ones (no lease, or an expired one: its holder died) up to a fair share of the live
/// instances, gives one back per round when it holds more than its share. Which instance
/// prefers which application is fixed (rendezvous hashing), so shares settle without talk.
final class LeaseKeeper: Service, Sendable {
    let store: any ClusterStore
    let instance: String
    let address: Mutex<String>
    /// The applications to share: the configured ones; those with waiting records are added.
    let applications: [String]
    let logger: Logger
    let held = Mutex<[String: Int64]>([:])
    /// Stopping: the leases were given back; only the heartbeat goes on.
    let retiring = Atomic<Bool>(false)
    /// Called when the set of held leases changed.
    let changed: @Sendable () -> Void
    /// Called after every round (the delivery worker looks for work: claims of others may have
    /// expired or been released meanwhile).
    let everyRound: @Sendable () -> Void

    init(
        store: any ClusterStore, instance: String, address: String, applications: [String], logger: Logger,
        changed: @escaping @Sendable () -> Void, everyRound: @escaping @Sendable () -> Void = {}
    ) {
        self.everyRound = everyRound
        self.store = store
        self.instance = instance
        self.address = Mutex(address)
        self.applications = applications
        self.logger = logger
        self.changed = changed
    }

    /// The leases held now: application → fencing token.
    var leases: [String: Int64] { held.withLock { $0 } }

    /// Forgets a lease the store said was lost.
    func lost(_ app: String) {
        held.withLock { _ = $0.removeValue(forKey: app) }
        logger.warning("application lease lost to another instance", metadata: ["app": "\(app)"])
    }

    /// Runs until the service stops; it is stopped last (after the delivery worker), so that its
    /// heartbeat keeps the claims of the last sends alive until they are answered.
    func run() async throws {
        var rounds = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await round(releasingClaims: rounds % 5 == 0)
            } catch {
                logger.error("application leases could not be renewed", metadata: ["error": "\(error)"])
            }
            rounds += 1
            guard await pause(Cluster.round) else { break }
        }
        await releaseAll()
        try? await store.forget(instance: instance)
    }

    /// One round: heartbeat, renew, balance.
    func round(releasingClaims: Bool = false) async throws {
        let now = try await store.heartbeat(instance: instance, address: address.withLock { $0 })
        if retiring.load(ordering: .acquiring) { return }
        var leases = try await store.renewLeases(holder: instance, ttl: Cluster.leaseTTL)
        let alive = try await store.instances(within: Cluster.leaseTTL).map(\.name)
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
            if let token = try await store.acquireLease(app: app, holder: instance, ttl: Cluster.leaseTTL) {
                leases[app] = token
                logger.info("application taken over", metadata: ["app": "\(app)", "token": "\(token)"])
            }
        }
        let before = held.withLock { held in
            defer { held = leases }
            return held
        }
        if before != leases { changed() }
        if releasingClaims {
            let released = try await store.releaseClaimsOfStaleInstances(staleAfter: Cluster.staleAfter)
            if released > 0 {
                logger.warning("delivery claims of a dead instance released", metadata: ["count": "\(released)"])
                if let store = store as? PostgresStore { await store.notifyOutbox() }
            }
        }
        everyRound()
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

/// Processes the records of the applications this instance holds: an application's tree is
/// loaded from its last committed state when its lease is taken; its records are taken from
/// the inbox in order, through the record pipeline, and committed with their removal from the
/// inbox under the lease (fenced: a commit after the lease was lost writes nothing, and the
/// records stay for the new owner).
struct ApplicationOwner: Service {
    let store: any ClusterStore & IngestStore
    let leases: LeaseKeeper
    /// Used for its batch preparation and commit (its queue is not used).
    let ingestor: Ingestor
    let wake: Wakeup
    let logger: Logger
    var batchLines = 2_000

    /// The combined source an inbox record is checked under, `node-1/socket@app`: its source
    /// and its application (an instance holds some applications of a source, so seq increases
    /// per pair). Instance and source names hold no `@`: the application follows the first.
    static func pipelineSource(_ record: InboxRecord) -> String { record.source + "@" + record.app }

    func run() async throws {
        var state = Ingestor.State(
            pipeline: ingestor.initial, builder: NotificationBuilder(sealers: ingestor.sealers), loaded: TreeLoader.Loaded())
        var loaded: [String: Int64] = [:]  // application → the token its tree was loaded under
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let held = leases.leases
            for (app, token) in loaded where held[app] != token {
                forget(app, &state)
                loaded[app] = nil
            }
            var worked = false
            for (app, token) in held.sorted(by: { $0.key < $1.key }) {
                if Task.isShuttingDownGracefully { break }
                do {
                    if loaded[app] == nil {
                        let one = try await TreeLoader.tree(app: app, from: store)
                        state.pipeline.processor.setTree(one.tree, app: app)
                        state.journalBytes[app] = one.journalBytes
                        loaded[app] = token
                        logger.info("application tree loaded", metadata: ["app": "\(app)", "journalRecords": "\(one.records)"])
                    }
                    let records = try await store.inbox(app: app, limit: batchLines)
                    if records.isEmpty { continue }
                    worked = true
                    // The index learns every subscription committed before these records were
                    // (read after them): a subscription created through any instance before a
                    // record was accepted is matched against it.
                    try await ingestor.registry.sync()
                    let lines = records.map { IngestLine(bytes: $0.line, source: Self.pipelineSource($0), position: $0.position) }
                    var prepared = try await ingestor.prepare(lines, &state)
                    prepared.batch.checkpoints = []  // the intake keeps the sources' checkpoints
                    prepared.batch.consumedInbox = records.map(\.id)
                    prepared.batch.leases = [app: token]
                    prepared.batch.leaseHolder = leases.instance
                    prepared.counts.ingested = [:]  // counted by the intake that accepted them
                    for snapshot in try await ingestor.commit(prepared) {
                        await ingestor.writeSnapshot(snapshot.app, snapshot.tree, through: snapshot.through)
                    }
                } catch let error as StoreError where { if case .leaseLost = error.code { true } else { false } }() {
                    leases.lost(app)
                    forget(app, &state)
                    loaded[app] = nil
                } catch {
                    if Task.isCancelled { return }
                    logger.error("processing an application failed; retrying", metadata: ["app": "\(app)", "error": "\(error)"])
                    forget(app, &state)  // reloaded from what was committed
                    loaded[app] = nil
                    try? await Task.sleep(for: .milliseconds(500))
                }
            }
            if !worked { await wake.wait(upTo: .milliseconds(500)) }
        }
        await leases.releaseAll()
    }

    /// Drops what this instance knew of an application it no longer holds.
    func forget(_ app: String, _ state: inout Ingestor.State) {
        state.pipeline.processor.setTree(DataTree(), app: app)
        state.pipeline.forgetWatermarks { $0.split(separator: "@", maxSplits: 1).last.map(String.init) == app }
        state.journalBytes[app] = nil
    }
}

/// LISTEN/NOTIFY: wakes the index follower, the owner and the delivery worker as soon as
/// another instance (or this one) has something for them. They also poll, so a notification
/// lost in a reconnection only delays.
struct ClusterListener: Service {
    let store: PostgresStore
    let logger: Logger
    let wake: @Sendable (String, String) -> Void

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await store.listen(logger: logger, wake)
        }
    }
}
