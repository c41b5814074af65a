import Logging
import PushCore
import PushContracts
import PushStore
import PushTestSupport
@testable import PushEngine

/// One instance of several on a throwaway PostgreSQL database: its store, index, leases and
/// owner, driven a round at a time (no service loop, no sleep).
struct ClusterInstance {
    static let logger = Logger(label: "test")

    let name: String
    let store: PostgresStore
    let registry: SubscriptionRegistry
    let keeper: LeaseKeeper
    let owner: ApplicationOwner
    let letters = RecordedLetters()
    let counters = IngestCounters()
    var holding: ApplicationOwner.Holding

    init(_ name: String, url: String, applications: [String] = ["toto"], batchLines: Int = 2_000, clock: ManualClock = ManualClock()) async throws {
        self.name = name
        store = try await PostgresStore.open(url: url, logger: Self.logger)
        registry = SubscriptionRegistry(store: store, logger: Self.logger)
        try await registry.load()
        keeper = LeaseKeeper(
            store: store, instance: name, address: AdvertisedAddress("\(name):1"), applications: applications, changed: Wakeup(),
            outbox: OutboxBell(), clock: clock, logger: Self.logger)
        let writer = BatchWriter(deadLetters: letters, counters: counters, index: registry, outbox: OutboxBell(), logger: Self.logger)
        let engine = RecordEngine(settings: [:], sealers: NoSealers(), registry: registry, logger: Self.logger)
        owner = ApplicationOwner(
            store: store, leases: keeper, engine: engine, registry: registry, writer: writer, wake: Wakeup(), clock: clock, batchLines: batchLines,
            logger: Self.logger)
        holding = ApplicationOwner.Holding(engine: engine)
    }

    /// A fresh database on the test server.
    static func database() throws -> String {
        try PostgresTestServer.shared.get().createDatabase()
    }

    /// One round of the owner.
    @discardableResult
    mutating func process() async -> Bool {
        let owner = self.owner
        return await owner.round(&holding)
    }

    /// Stores records of `app` in the inbox as an intake would (source `socket`).
    func enqueue(_ texts: [String], seqs: [Int64]) async throws {
        let records = zip(texts, seqs).map { text, seq in
            InboxRecord(app: "toto", source: "socket", position: seq, line: Array(text.utf8), seq: seq)
        }
        _ = try await store.enqueue(records, checkpoints: [SourceCheckpoint(source: "socket", lastSeq: seqs.max())])
    }
}
