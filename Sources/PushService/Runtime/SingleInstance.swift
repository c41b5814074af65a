import Foundation
import PushCore
import PushEngine
import PushStore

/// This process alone on its store (SQLite, or PostgreSQL held alone): it loads every tree at
/// start and processes every record itself (``Ingestor``).
struct SingleInstance: Deployment {
    let store: any RuntimeStore
    /// Host and process: a restart after a crash releases every claim anyway.
    let instance = "\(ProcessInfo.processInfo.hostName)-\(ProcessInfo.processInfo.processIdentifier)"
    let releasesEveryClaimAtStart = true

    func checkpointKey(_ source: String) -> String { source }

    func processing(_ parts: ServiceParts) async throws -> Processing {
        let trees = try await TreeLoader.load(from: store, logger: parts.logger)
        let checker = LineChecker(watermarks: parts.checkpoints.compactMapValues(\.lastSeq), maxLineBytes: parts.tuning.maxLineBytes)
        let engine = RecordEngine(
            trees: trees, settings: parts.settings, sealers: parts.sealers, registry: parts.registry, configuration: parts.engineConfiguration,
            logger: parts.logger)
        let writer = BatchWriter(deadLetters: parts.deadLetters, counters: parts.counters, index: parts.registry, outbox: parts.delivery, logger: parts.logger)
        let ingestor = Ingestor(
            queue: parts.queue, store: store, checker: checker, engine: engine, writer: writer, clock: parts.clock,
            configuration: parts.tuning.ingest, logger: parts.logger)
        return Processing(records: [ingestor], outbox: parts.delivery, cluster: nil)
    }
}
