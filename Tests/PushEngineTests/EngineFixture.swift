import Foundation
import Logging
import PushContracts
import PushCore
@testable import PushEngine
import PushJOSE
import PushJSON
import PushMatching
import PushStore
import PushTestSupport
import Synchronization

/// The record engine's pieces over a real SQLite store in a temporary folder, with a manual
/// clock: what the engine tests construct directly, without a service loop or a sleep.
struct EngineFixture {
    static let logger = Logger(label: "test")

    let store: SQLiteStore
    let registry: SubscriptionRegistry
    let letters = RecordedLetters()
    let counters = IngestCounters()
    let outbox = OutboxBell()
    let clock = ManualClock()

    /// - Parameter admitting: the applications whose read rules read data.
    init(admitting: Set<String> = []) async throws {
        store = try SQLiteStore(path: try Self.temporaryDatabase())
        registry = SubscriptionRegistry(store: store, admitting: admitting, logger: Self.logger)
        try await registry.load()
    }

    /// A database file in a new temporary folder.
    static func temporaryDatabase() throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("engine-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder.appendingPathComponent("store.db").path
    }

    var writer: BatchWriter {
        BatchWriter(deadLetters: letters, counters: counters, index: registry, outbox: outbox, logger: Self.logger)
    }

    /// An engine over this registry; `tree` (JSON) is `app`'s tree as loaded at start.
    func engine(settings: [String: PipelineSettings] = [:], tree: String? = nil, app: String = "toto") throws -> RecordEngine {
        var loaded = TreeLoader.Loaded()
        if let tree { loaded.processor.setTree(DataTree(root: try JSONParser.parse(Array(tree.utf8))), app: app) }
        return RecordEngine(trees: loaded, settings: settings, sealers: NoSealers(), registry: registry, logger: Self.logger)
    }

    /// Saves a subscription (``subscribe(_:uid:mode:app:in:)``); the index learns it.
    func subscribe(_ path: String, uid: String = "u1", mode: Mode = .childEvent, app: String = "toto") async throws -> Subscription {
        let subscription = try await Self.subscribe(path, uid: uid, mode: mode, app: app, in: store)
        try await registry.sync()
        return subscription
    }

    /// Saves a v1 subscription (with `{"sub": uid}` as its claims) in `store`; returns it with
    /// its handle.
    static func subscribe(_ path: String, uid: String = "u1", mode: Mode = .childEvent, app: String = "toto", in store: some SubscriptionStore)
        async throws -> Subscription
    {
        let tuple = SubscriptionTuple(app: app, uid: uid, kind: .fcm, destination: nil, path: try Path(path), context: "token-\(uid)")
        let subscription = Subscription(
            id: SubscriptionID.derive(tuple), tuple: tuple, mode: mode, format: .v1, encryption: nil, createdAt: 1, expiresAt: 9_999_999_999,
            auth: ["sub": .string(uid)])
        guard case .created(let created) = try await store.save(subscription, allowUpdate: false) else {
            throw FixtureError("the subscription at \(path) of \(uid) was not created")
        }
        return created
    }

    /// The handle of a stored subscription.
    static func handle(_ subscription: Subscription) throws -> Int64 {
        guard let handle = subscription.handle else { throw FixtureError("a subscription without handle") }
        return handle
    }

    static func put(_ seq: Int64, _ path: String, _ data: String, app: String = "toto") -> String {
        #"{"seq":\#(seq),"app":"\#(app)","op":"put","path":"\#(path)","data":\#(data)}"#
    }

    static func line(_ text: String, source: String = "socket", position: Int64 = 0, ack: IngestAck? = nil) -> IngestLine {
        IngestLine(bytes: Array(text.utf8), source: source, position: position, resumePosition: position + Int64(text.utf8.count) + 1, ack: ack)
    }

    /// Accepted lines, as the checker leaves them (no watermark before).
    static func checked(_ texts: [String], now: Int64 = 0) -> CheckedLines {
        var checker = LineChecker()
        return checker.check(texts.enumerated().map { line($1, position: Int64($0)) }, now: now)
    }

    /// The queued notifications, each as `recordSeq|handle|payload` (`-` for no record).
    static func outbox(_ store: some IngestStore) async throws -> [String] {
        try await store.notifications(limit: 100).map { stored in
            "\(stored.entry.recordSeq.map(String.init) ?? "-")|\(stored.entry.subscriptionHandle)|\(String(decoding: stored.entry.payload, as: UTF8.self))"
        }
    }

    /// The subscriptions a batch's operations are for, in order.
    static func handles(_ batch: CommitBatch) -> [Int64] {
        batch.operations.map { operation in
            switch operation {
            case .notify(let entry): entry.subscriptionHandle
            case .revoke(let handle, _, _): handle
            }
        }
    }

    /// The `seq` of each waiting record of the inbox, in order.
    static func inbox(_ store: some ClusterStore, app: String = "toto") async throws -> [Int64] {
        try await store.inbox(app: app, limit: 100).map { try ChangeRecord.parse($0.line).seq }
    }

    /// The handles among `handles` whose subscriptions the index holds under `app`.
    static func indexed(_ registry: SubscriptionRegistry, app: String = "toto", _ handles: [Int64]) -> [Int64] {
        let found = Set(registry.under(app: app, path: .root).map(\.handle))
        return handles.filter { found.contains($0) }
    }
}

/// The membership rules of the read-access tests: a room is read by its members.
enum Membership {
    static let rules = try! ReadRules.parse(
        try! JSONParser.parse(Array(#"{"rules":{"rooms":{"$room":{".read":"root.child('members/' + $room + '/' + auth.uid).exists()"}}}}"#.utf8)))
    static let settings = ["toto": PipelineSettings(maxWeight: 1 << 20, rules: rules)]
    static let tree = #"{"members":{"r1":{"alice":true,"bob":true}},"rooms":{"r1":{"title":"Lunch"}}}"#
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// v1 subscriptions only: nothing is sealed.
struct NoSealers: SealerProvider {
    func sealer(for subscription: Subscription) throws -> any EventSealer { throw FixtureError("v1 only here") }
}

/// The dead-letter file's durable appends, in memory.
final class RecordedLetters: DeadLetterSink {
    let letters = Mutex<[DeadLetter]>([])
    var location: String { "memory" }
    func append(_ letters: [DeadLetter]) throws { self.letters.withLock { $0 += letters } }
    var reasons: [String] { letters.withLock { $0.map(\.reason) } }
}

/// Counts the outbox's wake-ups.
final class OutboxBell: OutboxListener {
    let rings = Mutex(0)
    func outboxChanged() { rings.withLock { $0 += 1 } }
    var count: Int { rings.withLock { $0 } }
}
