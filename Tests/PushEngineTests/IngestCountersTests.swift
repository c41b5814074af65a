import PushEngine
import Testing

@Suite("Ingestion counters")
struct IngestCountersTests {
    @Test("a rejection's label is bounded whatever its text", arguments: [
        ("the line is 20000000 bytes; a record is at most 16777216 bytes", "too_long"),
        ("seq: missing; expected an integer", "invalid_seq"),
        ("seq 4 repeats the last accepted seq 4 of this source; seq must increase", "invalid_seq"),
        ("path \"/a//b\": empty segment", "invalid_path"),
        ("app: missing; expected the application id", "invalid_app"),
        ("unexpected end of input; expected a JSON value", "not_json"),
        ("apple: something", "not_json"),
        ("", "not_json"),
    ])
    func rejectionLabels(reason: String, label: String) {
        #expect(IngestCounters.reasonLabel(reason) == label)
    }
}
