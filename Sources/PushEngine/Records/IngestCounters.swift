import PushCore
import Synchronization

/// What ingestion did (SPEC §11.13): `pushdispatch_records_ingested_total{source}`,
/// `pushdispatch_records_rejected_total{reason}`, `pushdispatch_records_duplicate_total{source}`
/// (SPEC §4: socket lines accepted before), `pushdispatch_events_total{mode,status}`,
/// `pushdispatch_revocations_total{reason}`. Counted once the batch committed; also kept in
/// memory for `status` and tests.
public final class IngestCounters: Sendable {
    /// One batch's counts, gathered while it is prepared.
    public struct Batch: Sendable {
        public var ingested: [String: Int] = [:]
        public var rejected: [String: Int] = [:]
        /// Socket lines answered as duplicates (accepted before), by source.
        public var duplicates: [String: Int] = [:]
        public var events: [String: Int] = [:]
        public var revocations: [String: Int] = [:]
        /// The newest `ts` of the accepted records, by application (the overview's lag).
        public var newestTimestamp: [String: Int64] = [:]

        public init() {}

        /// Adds another batch's counts.
        public mutating func add(_ other: Batch) {
            ingested.merge(other.ingested, uniquingKeysWith: +)
            rejected.merge(other.rejected, uniquingKeysWith: +)
            duplicates.merge(other.duplicates, uniquingKeysWith: +)
            events.merge(other.events, uniquingKeysWith: +)
            revocations.merge(other.revocations, uniquingKeysWith: +)
            newestTimestamp.merge(other.newestTimestamp, uniquingKeysWith: max)
        }

        mutating func event(mode: Mode, status: PayloadStatus?) {
            events["\(mode.rawValue)/\((status ?? .ok).rawValue)", default: 0] += 1
        }
    }

    struct Totals {
        var ingested: [String: Int] = [:]
        var rejected: [String: Int] = [:]
        var duplicates: [String: Int] = [:]
        var newestTimestamp: [String: Int64] = [:]
    }

    let metrics: any MetricsRecorder
    let totals = Mutex(Totals())

    public init(metrics: any MetricsRecorder = NoMetrics()) {
        self.metrics = metrics
    }

    public func committed(_ batch: Batch) {
        totals.withLock { totals in
            for (source, count) in batch.ingested { totals.ingested[source, default: 0] += count }
            for (reason, count) in batch.rejected { totals.rejected[reason, default: 0] += count }
            for (source, count) in batch.duplicates { totals.duplicates[source, default: 0] += count }
            totals.newestTimestamp.merge(batch.newestTimestamp, uniquingKeysWith: max)
        }
        for (source, count) in batch.ingested { metrics.increment("pushdispatch_records_ingested_total", [("source", source)], by: count) }
        for (reason, count) in batch.rejected { metrics.increment("pushdispatch_records_rejected_total", [("reason", reason)], by: count) }
        for (source, count) in batch.duplicates { metrics.increment("pushdispatch_records_duplicate_total", [("source", source)], by: count) }
        for (key, count) in batch.events {
            let parts = key.split(separator: "/", maxSplits: 1).map(String.init)
            metrics.increment("pushdispatch_events_total", [("mode", parts[0]), ("status", parts.count > 1 ? parts[1] : "OK")], by: count)
        }
        for (reason, count) in batch.revocations { metrics.increment("pushdispatch_revocations_total", [("reason", reason)], by: count) }
    }

    /// Records accepted, by source.
    public var ingested: [String: Int] { totals.withLock { $0.ingested } }
    /// The newest `ts` of the records committed, by application (records that carry one).
    public var newestTimestamp: [String: Int64] { totals.withLock { $0.newestTimestamp } }
    /// Records rejected, by reason label.
    public var rejected: [String: Int] { totals.withLock { $0.rejected } }
    /// Socket lines answered as duplicates, by source.
    public var duplicates: [String: Int] { totals.withLock { $0.duplicates } }
}
