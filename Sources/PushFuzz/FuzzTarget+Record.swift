import PushContracts
import PushCore
import PushEngine
import PushJSON
import PushMatching

extension FuzzTarget {
    /// Longest line of the `record` target: shorter than the service's default (16 MiB) so
    /// that `too_long` is reached.
    static let recordMaxLineBytes = 2_048

    /// `record`: the change-record lines of the queue file and the socket (SPEC §4, §11.2).
    ///
    /// The input is split on `\n`, as both sources split their bytes (a line over the limit
    /// reaches the checker cut, with its length), and checked as one batch by the engine's
    /// `LineChecker` (`ChangeRecord.parse`, then `seq` after the source's last).
    ///
    /// - Every line is accepted or dead-lettered; each refusal's reason is non-empty and
    ///   bounded, and its dead-letter line is JSON that parses.
    /// - Accepted `seq`s strictly increase; the same lines sent again are all refused
    ///   (`invalid_seq`: a resend is never applied twice).
    /// - An accepted write applies to a data tree (empty, and the tree of the batch so far).
    public static func record(_ data: UnsafeBufferPointer<UInt8>) throws(FuzzViolation) {
        var pieces = Array(data).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if pieces.last?.isEmpty == true { pieces.removeLast() }  // the newline that ends the last line
        var position: Int64 = 0
        let lines = pieces.map { (piece: ArraySlice<UInt8>) -> IngestLine in
            defer { position += Int64(piece.count) + 1 }
            if piece.count > recordMaxLineBytes {
                return IngestLine(bytes: Array(piece.prefix(recordMaxLineBytes)), source: "queue-file", position: position, overflow: piece.count)
            }
            return IngestLine(bytes: Array(piece), source: "queue-file", position: position, resumePosition: position + Int64(piece.count) + 1)
        }
        var checker = LineChecker(maxLineBytes: recordMaxLineBytes)
        let checked = checker.check(lines, now: 1_700_000_000_000)
        try Check.that(checked.accepted.count + checked.letters.count == lines.count, "\(lines.count) lines, \(checked.accepted.count) accepted and \(checked.letters.count) refused")
        for letter in checked.letters {
            try Check.message(letter.reason, "a refused record's reason")
            do {
                _ = try JSONParser.parse(letter.json)
            } catch {
                throw FuzzViolation("a dead letter is not JSON (\(error)): \(Check.excerpt(letter.json))")
            }
        }
        var last: Int64?
        var tree = DataTree()
        for (_, record) in checked.accepted {
            if let last { try Check.that(record.seq > last, "accepted seq \(record.seq) after \(last)") }
            last = record.seq
            if case .write(let write) = record.operation {
                _ = DataTree().applying(write)
                tree.apply(write)
                // A put reads back: its (normalised) value is what the tree holds there.
                if case .put(let path, let value) = write {
                    try Check.that(tree.value(at: path) == value, "after a put at \(Check.excerpt(path.string)) the tree holds another value there")
                }
            }
        }
        // The same lines again, after the batch: every one refused.
        if !checked.accepted.isEmpty {
            let again = checker.check(checked.accepted.map { $0.line }, now: 1_700_000_000_001)
            try Check.that(again.accepted.isEmpty, "a record accepted again after its seq was accepted: \(Check.excerpt(again.accepted[0].line.bytes))")
        }
    }
}
