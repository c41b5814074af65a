import PushCore
import PushContracts
import PushJSON
import PushEngine
import Testing

@Suite("Line checks before a record is applied")
struct LineCheckerTests {
    func put(_ seq: Int64, app: String = "toto") -> [UInt8] {
        Array(#"{"seq":\#(seq),"app":"\#(app)","op":"put","path":"/x","data":1}"#.utf8)
    }

    func line(_ text: String, source: String = "socket", ack: IngestAck? = nil) -> IngestLine {
        line(Array(text.utf8), source: source, ack: ack)
    }

    func line(_ bytes: [UInt8], source: String = "socket", overflow: Int? = nil, resume: Int64 = 0, ack: IngestAck? = nil) -> IngestLine {
        IngestLine(bytes: bytes, source: source, position: 7, resumePosition: resume, fileIdentity: nil, overflow: overflow, ack: ack)
    }

    @Test(
        "each line is accepted or refused with the reason the dead-letter file and the socket answer give",
        arguments: [
            ([1, 2, 3, 5], [nil, nil, nil, nil]),
            ([5, 5, 3, 6], [nil, "seq 5 repeats the last accepted seq 5 of this source; seq must increase",
                "seq 3 goes back from the last accepted seq 5 of this source; seq must increase", nil]),
            ([-1, 0, Int64.max], [nil, nil, nil]),
        ] as [([Int64], [String?])])
    func sequences(seqs: [Int64], expected: [String?]) {
        var checker = LineChecker()
        let outcomes = seqs.map { seq -> String? in
            switch checker.check(line(put(seq)), source: "socket") {
            case .success(let record): #expect(record.seq == seq); return nil
            case .failure(let error): #expect(error.seq == seq); return error.reason
            }
        }
        #expect(outcomes == expected)
        #expect(checker.watermarks["socket"] == seqs.enumerated().filter { expected[$0.offset] == nil }.map(\.element).last)
    }

    @Test("sources keep their own watermarks")
    func perSource() {
        var checker = LineChecker(watermarks: ["queue-file": 10])
        #expect((try? checker.check(put(3), source: "socket").get()) != nil)
        #expect((try? checker.check(put(3), source: "queue-file").get()) == nil)
        #expect((try? checker.check(put(11), source: "queue-file").get()) != nil)
        #expect(checker.watermarks == ["queue-file": 11, "socket": 3])
    }

    @Test("a line cut at the limit, a line that is not a record: refused, the watermark unmoved")
    func refused() {
        var checker = LineChecker(watermarks: ["socket": 1], maxLineBytes: 100)
        guard case .failure(let long) = checker.check(line(Array(repeating: 0x61, count: 100), overflow: 5_000), source: "socket") else {
            Issue.record("a line over the limit was accepted")
            return
        }
        #expect(long.reason == "the line is 5000 bytes; a record is at most 100 bytes")
        guard case .failure(let notJSON) = checker.check(line(Array("{\"seq\":2".utf8)), source: "socket") else {
            Issue.record("a cut JSON object was accepted")
            return
        }
        #expect(!notJSON.reason.isEmpty)
        #expect(checker.watermarks == ["socket": 1])
    }

    @Test("a batch: answers for every line, dead letters and counts for the refused, checkpoints as of the batch")
    func batch() async {
        var checker = LineChecker(watermarks: ["node-1/socket": 4])
        let acks = (0..<3).map { _ in IngestAck() }
        let lines = [
            line(put(5), ack: acks[0]), line("[]", ack: acks[1]),
            line(put(6, app: "other"), source: "queue-file", resume: 120, ack: acks[2]),
        ]
        let checked = checker.check(lines, now: 99) { "node-1/" + $0 }
        #expect(checked.accepted.map(\.record.seq) == [5, 6])
        #expect(checked.letters.map(\.source) == ["socket"])
        #expect(checked.letters.first?.timestamp == 99)
        #expect(checked.counts.ingested == ["socket": 1, "queue-file": 1])
        #expect(checked.counts.rejected == ["not_json": 1])
        #expect(checked.checkpoints.map(\.source) == ["node-1/queue-file", "node-1/socket"])
        #expect(checked.checkpoints.map(\.lastSeq) == [6, 5])
        #expect(checked.checkpoints.map(\.position) == [120, 0])
        for (ack, answer) in checked.answers { ack.complete(answer) }
        #expect(await acks[0].result() == .accepted(seq: 5))
        #expect(await acks[1].result() == .rejected(seq: nil, reason: checked.letters[0].reason))
        #expect(await acks[2].result() == .accepted(seq: 6))
    }

    @Test("a socket line at or below its source's watermark was accepted before: answered duplicate with that watermark, neither applied nor dead-lettered, counted")
    func socketResends() async {
        var checker = LineChecker(watermarks: ["socket": 4])
        let acks = (0..<5).map { _ in IngestAck() }
        let lines = [
            line(put(4), ack: acks[0]), line(put(2), ack: acks[1]), line(put(5), ack: acks[2]), line(put(5), ack: acks[3]),
            // Not a record: refused whatever its seq.
            line(Array(#"{"seq":3,"app":"toto","op":"merge"}"#.utf8), ack: acks[4]),
        ]
        let checked = checker.check(lines, now: 99)
        #expect(checked.accepted.map(\.record.seq) == [5])
        #expect(checked.letters.count == 1 && checked.letters.first?.reason.contains("op") == true)
        #expect(checked.counts.ingested == ["socket": 1])
        #expect(checked.counts.duplicates == ["socket": 3])
        #expect(checked.counts.rejected == ["invalid_op": 1])
        #expect(checker.watermarks == ["socket": 5])
        #expect(checked.checkpoints.map(\.lastSeq) == [5])
        for (ack, answer) in checked.answers { ack.complete(answer) }
        var answers: [AckResult] = []
        for ack in acks { answers.append(await ack.result()) }
        #expect(Array(answers.prefix(4)) == [.duplicate(seq: 4, watermark: 4), .duplicate(seq: 2, watermark: 4), .accepted(seq: 5), .duplicate(seq: 5, watermark: 5)])
        // The answer's JSON, byte for byte (SPEC §4).
        #expect(String(decoding: answers[1].line, as: UTF8.self) == #"{"seq":2,"ok":true,"duplicate":true,"watermark":4}"# + "\n")
        #expect(String(decoding: answers[2].line, as: UTF8.self) == #"{"seq":5,"ok":true}"# + "\n")
    }

    @Test("a queue-file line at or below its source's watermark is refused and dead-lettered as before (SPEC §4)")
    func queueFileRepeats() {
        var checker = LineChecker(watermarks: ["queue-file": 4])
        let checked = checker.check([line(put(4), source: "queue-file"), line(put(3), source: "queue-file")], now: 99)
        #expect(checked.accepted.isEmpty && checked.answers.isEmpty)
        #expect(checked.letters.map(\.reason) == [
            "seq 4 repeats the last accepted seq 4 of this source; seq must increase",
            "seq 3 goes back from the last accepted seq 4 of this source; seq must increase",
        ])
        #expect(checked.counts.rejected == ["invalid_seq": 2] && checked.counts.duplicates.isEmpty)
    }

    @Test("records the store found accepted through another instance: a socket line's answer becomes a duplicate's, another line is refused")
    func acceptedElsewhere() async {
        var checker = LineChecker()
        let acks = [IngestAck(), IngestAck()]
        var checked = checker.check(
            [line(put(2), ack: acks[0]), line(put(3), ack: acks[1]), line(put(7), source: "queue-file")], now: 99)
        let letters = checked.acceptedElsewhere([(index: 0, watermark: 6), (index: 2, watermark: 9)], now: 100)
        #expect(checked.accepted.map(\.record.seq) == [3])
        #expect(letters.map(\.source) == ["queue-file"] && checked.letters.count == 1)
        #expect(letters.first?.reason.contains("was accepted already from this source (through another instance; last accepted 9)") == true)
        #expect(checked.counts.ingested == ["socket": 1, "queue-file": 0])
        #expect(checked.counts.duplicates == ["socket": 1])
        #expect(checked.counts.rejected == ["invalid_seq": 1])
        for (ack, answer) in checked.answers { ack.complete(answer) }
        #expect(await acks[0].result() == .duplicate(seq: 2, watermark: 6))
        #expect(await acks[1].result() == .accepted(seq: 3))
    }
}
