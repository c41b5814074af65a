import Logging
import PushCore
import PushContracts
import ServiceLifecycle

/// Takes lines from this instance's sources into the shared inbox: each line is checked as far
/// as it can be without the tree (``LineChecker``: a valid record, its `seq` after its
/// source's last), the accepted ones are stored with the sources' checkpoints in one
/// transaction, the refused ones dead-lettered; socket clients are answered once the
/// transaction committed, so what was acknowledged survives this instance.
public struct InboxIntake: Service {
    let queue: IngestQueue
    let store: any ClusterStore
    /// A source's checkpoint key (``SharedInstances/sourceKey(source:machine:)``).
    let key: @Sendable (String) -> String
    /// This instance's sources' watermarks, by source key (`node-1/socket`).
    let checker: LineChecker
    let writer: BatchWriter
    let clock: any ServiceClock
    let logger: Logger
    let batchLines: Int

    public init(
        queue: IngestQueue, store: any ClusterStore, key: @escaping @Sendable (String) -> String, checker: LineChecker, writer: BatchWriter,
        clock: any ServiceClock, batchLines: Int = 2_000, logger: Logger
    ) {
        self.queue = queue
        self.store = store
        self.key = key
        self.checker = checker
        self.writer = writer
        self.clock = clock
        self.batchLines = batchLines
        self.logger = logger
    }

    public func run() async throws {
        try await withGracefulShutdownHandler {
            var checker = self.checker
            while true {
                let lines = await queue.receive(limit: batchLines)
                if lines.isEmpty {
                    if queue.isDone || Task.isCancelled { break }  // finished and drained
                    continue  // woken for work that is the owner's
                }
                try await take(lines, &checker)
            }
        } onGracefulShutdown: {
            queue.finish()
        }
    }

    func take(_ lines: [IngestLine], _ checker: inout LineChecker) async throws {
        let key = self.key
        let now = clock.now
        let checked = checker.check(lines, now: now, key: key)
        let records = checked.accepted.map { line, record in
            InboxRecord(app: record.app, source: key(line.source), position: line.position, line: line.bytes, seq: record.seq)
        }
        var watermarks: [String: Int64] = [:]
        try await writer.accept(checked, "storing records in the inbox", now: now) {
            let result = try await store.enqueue(records, checkpoints: checked.checkpoints)
            watermarks = result.watermarks
            return result.duplicates
        }
        checker.adopt(watermarks)
    }
}
