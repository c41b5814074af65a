import PushTestSupport
import Tracing
import Testing

@testable import PushTracing

/// A context told apart by a marker.
enum Marker: ServiceContextKey {
    typealias Value = String
}

func context(_ marker: String) -> ServiceContext {
    var context = ServiceContext.topLevel
    context[Marker.self] = marker
    return context
}

/// The record contexts a delivery attempt continues: kept by application and seq, the oldest
/// forgotten past the capacity, a record kept again (the same seq from another batch) not lost
/// when its earlier slot is reused.
@Suite("Record contexts for delivery spans")
struct RecordContextsTests {
    @Test("kept by application and seq; the oldest forgotten past the capacity")
    func bounded() {
        let contexts = RecordContexts(capacity: 3)
        for seq: Int64 in 1...3 { contexts.keep(app: "a", seq: seq, context: context("t\(seq)")) }
        #expect(contexts.context(app: "a", seq: 1)?[Marker.self] == "t1" && contexts.context(app: "b", seq: 1)?[Marker.self] == nil)
        contexts.keep(app: "a", seq: 4, context: context("t4"))
        #expect(contexts.context(app: "a", seq: 1)?[Marker.self] == nil)
        #expect((2...4).map { contexts.context(app: "a", seq: $0)?[Marker.self] } == ["t2", "t3", "t4"])
    }

    @Test("a record kept again keeps its newer context when its older slot is reused")
    func keptAgain() {
        let contexts = RecordContexts(capacity: 2)
        contexts.keep(app: "a", seq: 1, context: context("old"))
        contexts.keep(app: "a", seq: 1, context: context("new"))
        #expect(contexts.context(app: "a", seq: 1)?[Marker.self] == "new")
        // The next keep reuses the slot "old" held: "new" stays.
        contexts.keep(app: "a", seq: 2, context: context("t2"))
        #expect(contexts.context(app: "a", seq: 1)?[Marker.self] == "new" && contexts.context(app: "a", seq: 2)?[Marker.self] == "t2")
        contexts.keep(app: "a", seq: 3, context: context("t3"))
        #expect(contexts.context(app: "a", seq: 1)?[Marker.self] == nil)
    }

    @Test("a capacity below one holds one")
    func smallest() {
        let contexts = RecordContexts(capacity: 0)
        contexts.keep(app: "a", seq: 1, context: context("t1"))
        #expect(contexts.context(app: "a", seq: 1)?[Marker.self] == "t1")
    }
}

/// The `traceparent` values a record's span continues (W3C Trace Context §3.2); any other is
/// ignored.
@Suite("W3C traceparent check")
struct TraceparentCheckTests {
    static let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test(
        "valid and invalid values",
        arguments: [
            (valid, true),
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true),
            ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more", true),
            ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true),
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more", false),
            ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01more", false),
            ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false),
            ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", false),
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false),
            ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false),
            ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false),
            ("00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", false),
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", false),
            ("00-zz-not-a-context", false),
            ("", false),
            ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + String(repeating: "x", count: 300), false),
        ])
    func check(_ text: String, _ valid: Bool) {
        #expect(Traces.isValid(text) == valid, "\(text)")
    }

    @Test("seeded mutations of a valid value: never a crash, and only valid shapes accepted")
    func mutations() {
        var mutator = Mutator(seed: 36)
        for _ in 0..<20_000 {
            let candidate = String(decoding: mutator.mutateBytes(Array(Self.valid.utf8)), as: UTF8.self)
            if Traces.isValid(candidate) {
                // Accepted: version 00's shape (or a later version's prefix), lower-case hex.
                let bytes = Array(candidate.utf8)
                #expect(bytes.count >= 55 && bytes[2] == 0x2D && bytes[35] == 0x2D && bytes[52] == 0x2D, "\(candidate)")
                #expect(bytes.prefix(55).allSatisfy { $0 == 0x2D || (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }, "\(candidate)")
            }
        }
    }
}
