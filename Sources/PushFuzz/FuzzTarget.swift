/// The fuzz bodies of issue 33: one function per parser that takes outside input.
///
/// Each body takes arbitrary bytes, feeds them to the parser and checks what must hold whatever
/// the input: no trap; a refusal whose message is non-empty, bounded and echoes no secret; an
/// accepted value that round-trips where that is meaningful. A body throws ``FuzzViolation``
/// when an invariant fails; the libFuzzer entry points (`Fuzz/Targets/<name>/Entry.swift`) turn
/// that into a trap libFuzzer reports, and `PushFuzzTests` into a failed test naming the input.
/// A trap inside a parser is a crash in both.
///
/// docs/testing.md ("Fuzzing") says what each target checks and how to run them.
public enum FuzzTarget {
    public typealias Body = @Sendable (UnsafeBufferPointer<UInt8>) throws(FuzzViolation) -> Void

    /// Every target by name: the names of `Fuzz/Package.swift`, `Fuzz/corpus/<name>/` and
    /// `Fuzz/regressions/<name>/`.
    public static let all: [(name: String, body: Body)] = [
        ("json", json),
        ("record", record),
        ("rules", rules),
        ("jose", jose),
        ("bearer", bearer),
        ("subscription", subscription),
        ("webpush", webpush),
        ("provider", provider),
        ("config", config),
    ]

    /// Runs `body` on libFuzzer's input; a violated invariant traps with its description.
    public static func trapping(_ body: Body, _ data: UnsafePointer<UInt8>?, _ size: Int) {
        do {
            try body(UnsafeBufferPointer(start: data, count: data == nil ? 0 : size))
        } catch {
            fatalError(error.description)
        }
    }

    /// Runs `body` on `bytes`.
    public static func run(_ body: Body, _ bytes: [UInt8]) throws(FuzzViolation) {
        try bytes.withUnsafeBufferPointer { buffer throws(FuzzViolation) in try body(buffer) }
    }
}

/// An invariant a fuzz body found violated: which, and on what.
public struct FuzzViolation: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = "fuzz invariant violated: " + description
    }
}
