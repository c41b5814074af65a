import Logging
import PushContracts
import PushCore
import PushMatching
import ServiceLifecycle

/// Processes the records of the applications this instance holds: an application's tree is
/// loaded from its last committed state when its lease is taken; its records are taken from
/// the inbox in order, through the ``RecordEngine``, and committed with their removal from the
/// inbox under the lease (``LeaseFence``: a commit after the lease was lost writes nothing, and
/// the records stay for the new owner).
///
/// The records were checked when the intake accepted them (their JSON, their `seq`); they are
/// counted there too.
public struct ApplicationOwner: Service {
    let store: any ClusterStore & SubscriptionStore
    let leases: LeaseKeeper
    let engine: RecordEngine
    let registry: SubscriptionRegistry
    let writer: BatchWriter
    let wake: Wakeup
    let clock: any ServiceClock
    let logger: Logger
    let batchLines: Int

    public init(
        store: any ClusterStore & SubscriptionStore, leases: LeaseKeeper, engine: RecordEngine, registry: SubscriptionRegistry, writer: BatchWriter, wake: Wakeup,
        clock: any ServiceClock, batchLines: Int = 2_000, logger: Logger
    ) {
        self.store = store
        self.leases = leases
        self.engine = engine
        self.registry = registry
        self.writer = writer
        self.wake = wake
        self.clock = clock
        self.batchLines = batchLines
        self.logger = logger
    }

    /// What the owner carries from one round to the next: the engine, and the token each
    /// application's tree was loaded under.
    struct Holding {
        var engine: RecordEngine
        var loaded: [String: Int64] = [:]
    }

    public func run() async throws {
        var holding = Holding(engine: engine)
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            if !(await round(&holding)) { await wake.wait(upTo: .milliseconds(500), on: clock) }
        }
        await leases.releaseAll()
    }

    /// One round over the applications held now: trees loaded for those just taken (and
    /// audited), one batch of each one's inbox processed and committed under its lease, trees
    /// forgotten for those lost. Returns whether there was work.
    func round(_ holding: inout Holding) async -> Bool {
        let held = leases.leases
        for (app, token) in holding.loaded where held[app] != token {
            holding.engine.forget(app: app)
            holding.loaded[app] = nil
        }
        var worked = false
        // Subscriptions created or changed since the last round, by application: each is
        // evaluated by its application's owner before records reach it (SPEC §12.5).
        var admissions: [String: [Int64: String]] = [:]
        for (handle, app) in registry.takeAdmissions() where held[app] != nil { admissions[app, default: [:]][handle] = app }
        for (app, token) in held.sorted(by: { $0.key < $1.key }) {
            if Task.isShuttingDownGracefully { break }
            do {
                if try await process(app, token: token, admitting: admissions.removeValue(forKey: app) ?? [:], &holding) { worked = true }
            } catch let error as StoreError where error.kind == .leaseLost {
                leases.lost(app)
                holding.engine.forget(app: app)
                holding.loaded[app] = nil
            } catch {
                if Task.isCancelled { return worked }
                logger.error("processing an application failed; retrying", metadata: ["app": "\(app)", "error": "\(error)"])
                holding.engine.forget(app: app)  // reloaded from what was committed
                holding.loaded[app] = nil
                try? await Task.sleep(for: .milliseconds(500))  // the store recovers in real time
            }
        }
        return worked
    }

    /// One batch of `app`, held under `token`: its tree loaded first when it was just taken,
    /// then its waiting records (and subscriptions to admit) processed and committed under the
    /// lease. Returns whether there was work.
    func process(_ app: String, token: Int64, admitting: [Int64: String], _ holding: inout Holding) async throws -> Bool {
        if holding.loaded[app] == nil {
            let one = try await TreeLoader.tree(app: app, from: store)
            holding.engine.load(app: app, tree: one.tree, journalBytes: one.journalBytes)
            holding.loaded[app] = token
            logger.info("application tree loaded", metadata: ["app": "\(app)", "journalRecords": "\(one.records)"])
            try await audit(app, token: token, &holding.engine)
        }
        let records = try await store.inbox(app: app, limit: batchLines)
        if records.isEmpty && admitting.isEmpty { return false }
        // The index learns every subscription committed before these records were (read after
        // them): a subscription created through any instance before a record was accepted is
        // matched against it.
        if !records.isEmpty { try await registry.sync() }
        let now = clock.now
        let prepared = try await holding.engine.prepare(Self.lines(records, now: now), now: now, admitting: admitting)
        if records.isEmpty && prepared.batch.isEmpty && prepared.effects.isEmpty { return true }
        let fence = LeaseFence(app: app, token: token, holder: leases.instance, consumed: records.map(\.id))
        let snapshots = SnapshotWriter(store: store, logger: logger)
        for snapshot in try await writer.commit(prepared, { try await store.commit($0, fence: fence) }) {
            await snapshots.write(snapshot)
        }
        return true
    }

    /// Every subscription of `app` evaluated against the tree just loaded (SPEC §12.5): the
    /// denied revoked, under the lease.
    func audit(_ app: String, token: Int64, _ engine: inout RecordEngine) async throws {
        let fence = LeaseFence(app: app, token: token, holder: leases.instance, consumed: [])
        try await engine.audit(app: app, store: store, now: clock.now) { prepared in
            _ = try await writer.commit(prepared, { try await store.commit($0, fence: fence) })
        }
    }

    /// The inbox's records as checked lines. They were checked when accepted; one that no
    /// longer reads as a record (a damaged row) is dead-lettered with why.
    static func lines(_ records: [InboxRecord], now: Int64) -> CheckedLines {
        var checked = CheckedLines()
        for record in records {
            let line = IngestLine(bytes: record.line, source: record.source, position: record.position)
            do {
                checked.accepted.append((line, try ChangeRecord.parse(record.line)))
            } catch {
                checked.reject(line, error, now: now)
            }
        }
        return checked
    }
}
