import PushContracts
import PushCore
import PushMatching

/// The checks a line passes before its record is applied (SPEC §4, §11.2): its length, a valid
/// change record, and a `seq` after the last accepted one of its source (on the socket, one at
/// or below it is a duplicate, answered so). The single instance's
/// ``Ingestor``, the shared ``InboxIntake`` and `replay` all check lines here; a watermark
/// moves only with an accepted record.
public struct LineChecker: Sendable {
    /// The last accepted `seq` of each source, by source key.
    public private(set) var watermarks: [String: Int64]
    /// Longest line accepted (a longer one reaches the checker cut, with its length).
    public let maxLineBytes: Int

    public init(watermarks: [String: Int64] = [:], maxLineBytes: Int = 16 << 20) {
        self.watermarks = watermarks
        self.maxLineBytes = maxLineBytes
    }

    /// Takes the watermarks the store holds now (a source shared with other instances moves
    /// on without this checker): a watermark only moves forward.
    public mutating func adopt(_ stored: [String: Int64]) {
        for (source, seq) in stored where seq > watermarks[source] ?? .min { watermarks[source] = seq }
    }

    /// Checks one line of the source whose watermark is kept under `source`; accepted, the
    /// watermark moves to the record's `seq`.
    public mutating func check(_ line: IngestLine, source: String) -> Result<ChangeRecord, RecordError> {
        Self.result(verdict(line.bytes, overflow: line.overflow, source: source))
    }

    /// Checks one line's bytes (no length limit: `replay` reads whole files).
    public mutating func check(_ bytes: [UInt8], source: String) -> Result<ChangeRecord, RecordError> {
        Self.result(verdict(bytes, overflow: nil, source: source))
    }

    /// What the checks make of one line.
    enum Verdict {
        /// A record after its source's watermark (which moved to its `seq`).
        case next(ChangeRecord)
        /// A record at or below its source's watermark, `watermark` (unmoved).
        case atOrBelow(ChangeRecord, watermark: Int64)
        /// Not an acceptable record.
        case refused(RecordError)
    }

    /// Checks one line (cut at the limit when `overflow`, its length, is given); a record after
    /// the watermark moves it.
    mutating func verdict(_ bytes: [UInt8], overflow: Int?, source: String) -> Verdict {
        if let length = overflow {
            return .refused(RecordError(.tooLong, "the line is \(length) bytes; a record is at most \(maxLineBytes) bytes"))
        }
        let record: ChangeRecord
        do {
            record = try ChangeRecord.parse(bytes)
        } catch {
            return .refused(error)
        }
        if let watermark = watermarks[source], record.seq <= watermark { return .atOrBelow(record, watermark: watermark) }
        watermarks[source] = record.seq
        return .next(record)
    }

    /// A verdict as one line's result: a record at or below the watermark is refused.
    static func result(_ verdict: Verdict) -> Result<ChangeRecord, RecordError> {
        switch verdict {
        case .next(let record): .success(record)
        case .atOrBelow(let record, let watermark): .failure(sequenceError(record.seq, after: watermark))
        case .refused(let error): .failure(error)
        }
    }

    /// Checks a batch of lines, in order; `key` names each line's watermark. What a refused
    /// line leaves (its dead letter, its answer, its count) and what an accepted one leaves (its
    /// answer, its count) is gathered with the sources' checkpoints as of the batch.
    ///
    /// A line that is answered (the socket's, a redrive's) whose `seq` is at or below its
    /// source's watermark was accepted before, and is sent again (its client lost the answer):
    /// it is answered as a duplicate with the watermark, counted, and neither applied nor
    /// dead-lettered (SPEC §4). A queue file's line there is refused.
    public mutating func check(_ lines: [IngestLine], now: Int64, key: (String) -> String = { $0 }) -> CheckedLines {
        var checked = CheckedLines()
        var positions: [String: (position: Int64, identity: String?)] = [:]
        for line in lines {
            let source = key(line.source)
            positions[source] = (line.resumePosition, line.fileIdentity)
            switch verdict(line.bytes, overflow: line.overflow, source: source) {
            case .next(let record):
                checked.accepted.append((line, record))
                checked.counts.ingested[line.source, default: 0] += 1
                if let timestamp = record.timestamp {
                    checked.counts.newestTimestamp[record.app] = max(checked.counts.newestTimestamp[record.app] ?? .min, timestamp)
                }
                if let ack = line.ack { checked.answers.append((ack, .accepted(seq: record.seq))) }
            case .atOrBelow(let record, let watermark):
                if let ack = line.ack {
                    checked.duplicate(line, ack, seq: record.seq, watermark: watermark)
                } else {
                    checked.reject(line, Self.sequenceError(record.seq, after: watermark), now: now)
                }
            case .refused(let error):
                checked.reject(line, error, now: now)
            }
        }
        checked.checkpoints = positions.sorted { $0.key < $1.key }.map { source, position in
            SourceCheckpoint(source: source, lastSeq: watermarks[source], position: position.position, fileIdentity: position.identity)
        }
        return checked
    }

    /// Why `seq` cannot follow `last`, the last accepted seq of its source, when it is at or
    /// below it (SPEC §4: strictly increasing per source).
    public static func sequenceError(_ seq: Int64, after last: Int64) -> RecordError {
        let what = seq == last ? "repeats" : "goes back from"
        return RecordError(.invalidSeq, "seq \(seq) \(what) the last accepted seq \(last) of this source; seq must increase", seq: seq)
    }
}

/// A batch of lines after their checks: the accepted records in order, and what the batch
/// leaves besides its records' effects.
public struct CheckedLines: Sendable {
    /// Accepted records, in order, with their lines (journal, answers).
    public var accepted: [(line: IngestLine, record: ChangeRecord)] = []
    /// Refused lines, for the dead-letter file (durable before the checkpoint that skips them).
    public var letters: [DeadLetter] = []
    /// Socket answers, given once the batch is durable.
    public var answers: [(IngestAck, AckResult)] = []
    /// Where each source stands after the batch (`nil` for records that come from the inbox:
    /// the intake that accepted them keeps their sources' checkpoints).
    public var checkpoints: [SourceCheckpoint] = []
    public var counts = IngestCounters.Batch()

    public init() {}

    /// Takes back records accepted here that the store found accepted already (their `seq`
    /// came through another instance): a socket line's answer becomes a duplicate's, with the
    /// watermark the store had; another line is refused. Returns the refused lines' dead
    /// letters; the counts move.
    public mutating func acceptedElsewhere(_ duplicates: [AcceptedAlready], now: Int64) -> [DeadLetter] {
        var letters: [DeadLetter] = []
        var taken = Set<Int>()
        for (index, watermark) in duplicates where accepted.indices.contains(index) {
            let (line, record) = accepted[index]
            taken.insert(index)
            counts.ingested[line.source, default: 1] -= 1
            if let ack = line.ack, let at = answers.firstIndex(where: { $0.0 === ack }) {
                counts.duplicates[line.source, default: 0] += 1
                answers[at] = (ack, .duplicate(seq: record.seq, watermark: watermark))
                continue
            }
            let error = RecordError(
                .invalidSeq, "seq \(record.seq) was accepted already from this source (through another instance; last accepted \(watermark)): "
                    + "a resend is not applied twice", seq: record.seq)
            counts.rejected[error.kind.label, default: 0] += 1
            letters.append(DeadLetter(timestamp: now, source: line.source, position: line.position, reason: error.reason, line: line.bytes))
        }
        accepted = accepted.enumerated().filter { !taken.contains($0.offset) }.map(\.element)
        self.letters += letters
        return letters
    }

    /// Answers `line`, a record accepted before (its `seq` at or below `watermark`), as a
    /// duplicate; counted, not dead-lettered.
    public mutating func duplicate(_ line: IngestLine, _ ack: IngestAck, seq: Int64, watermark: Int64) {
        counts.duplicates[line.source, default: 0] += 1
        answers.append((ack, .duplicate(seq: seq, watermark: watermark)))
    }

    /// Refuses `line` for `error`: dead-lettered, answered, counted.
    public mutating func reject(_ line: IngestLine, _ error: RecordError, now: Int64) {
        counts.rejected[error.kind.label, default: 0] += 1
        letters.append(DeadLetter(timestamp: now, source: line.source, position: line.position, reason: error.reason, line: line.bytes))
        if let ack = line.ack { answers.append((ack, .rejected(seq: error.seq, reason: error.reason))) }
    }
}
