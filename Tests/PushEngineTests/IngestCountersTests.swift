import PushCore
import PushEngine
import PushMatching
import Testing

@Suite("Ingestion counters")
struct IngestCountersTests {
    @Test(
        "a rejection's label is its kind, bounded whatever the line held",
        arguments: [
            ("{\"seq\":1,", "not_json"),
            ("[1,2]", "not_json"),
            ("{\"app\":\"toto\"}", "invalid_seq"),
            ("{\"seq\":1.5,\"app\":\"toto\"}", "invalid_seq"),
            ("{\"seq\":1}", "invalid_app"),
            ("{\"seq\":1,\"app\":\"to/to\",\"op\":\"put\"}", "invalid_app"),
            ("{\"seq\":1,\"app\":\"toto\"}", "invalid_op"),
            ("{\"seq\":1,\"app\":\"toto\",\"op\":\"delete\"}", "invalid_op"),
            ("{\"seq\":1,\"app\":\"toto\",\"op\":\"put\",\"ts\":\"now\",\"path\":\"/a\",\"data\":1}", "invalid_ts"),
            ("{\"seq\":1,\"app\":\"toto\",\"op\":\"put\",\"path\":\"/a/b$c\",\"data\":1}", "invalid_path"),
            ("{\"seq\":1,\"app\":\"toto\",\"op\":\"put\",\"path\":\"/a\"}", "invalid_data"),
            ("{\"seq\":1,\"app\":\"toto\",\"op\":\"revoke\",\"uid\":7,\"reason\":\"expired\"}", "invalid_uid"),
            ("{\"seq\":1,\"app\":\"toto\",\"op\":\"revoke\",\"uid\":\"u\",\"reason\":\"bored\"}", "invalid_reason"),
        ])
    func rejectionLabels(line: String, label: String) throws {
        do {
            _ = try ChangeRecord.parse(Array(line.utf8))
            Issue.record("\(line) was read")
        } catch {
            #expect(error.kind.label == label, "\(error.reason)")
        }
    }
}
