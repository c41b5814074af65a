import Foundation
@testable import PushFuzz
import Testing

/// Every fuzz target on every input of its corpus and its regressions, through the same bodies
/// libFuzzer runs (`Fuzz/`, `scripts/fuzz.sh`): what CI runs of the fuzzers, without sanitizers.
@Suite("fuzz corpora replayed through the fuzz bodies (issue 33)")
struct CorpusReplayTests {
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    /// The files of `Fuzz/<folder>/<target>/`, by name; none when it does not exist.
    static func inputs(_ folder: String, _ target: String) throws -> [(name: String, bytes: [UInt8])] {
        let directory = fuzz.appendingPathComponent(folder).appendingPathComponent(target)
        guard FileManager.default.fileExists(atPath: directory.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { !$0.hasPrefix(".") }.sorted().map { name in
            (name, [UInt8](try Data(contentsOf: directory.appendingPathComponent(name))))
        }
    }

    @Test("each target holds on every input of its corpus and of its regressions", arguments: FuzzTarget.all.map(\.name))
    func replay(target: String) throws {
        let body = try #require(FuzzTarget.all.first { $0.name == target }?.body)
        let corpus = try Self.inputs("corpus", target)
        #expect(corpus.count >= 3, "Fuzz/corpus/\(target)/ holds \(corpus.count) seeds")
        for (folder, inputs) in [("corpus", corpus), ("regressions", try Self.inputs("regressions", target))] {
            for input in inputs {
                // `known-…`: a regression whose fix is described but not made yet; once it is
                // made, the known issue is missing and the test says so (rename the file).
                let known = input.name.hasPrefix("known-")
                withKnownIssue("Fuzz/\(folder)/\(target)/\(input.name) is a known failure") {
                    do {
                        try FuzzTarget.run(body, input.bytes)
                    } catch {
                        Issue.record("Fuzz/\(folder)/\(target)/\(input.name): \(error)")
                    }
                } when: {
                    known
                }
            }
        }
    }

    @Test("the fuzz package builds one executable per target, each calling its body")
    func packageListsEveryTarget() throws {
        let manifest = try String(contentsOf: Self.fuzz.appendingPathComponent("Package.swift"), encoding: .utf8)
        let line = try #require(manifest.split(separator: "\n").first { $0.hasPrefix("let names = [") })
        let names = line.split(separator: "\"").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
        #expect(names == FuzzTarget.all.map(\.name))
        for name in names {
            let entry = try String(contentsOf: Self.fuzz.appendingPathComponent("Targets/\(name)/Entry.swift"), encoding: .utf8)
            #expect(entry.contains("FuzzTarget.\(name),"), "Fuzz/Targets/\(name)/Entry.swift does not call FuzzTarget.\(name)")
        }
    }

    @Test("the shared checks refuse empty, long and secret-echoing messages")
    func checksRefuse() throws {
        #expect(throws: FuzzViolation.self) { try Check.message("", "test") }
        #expect(throws: FuzzViolation.self) { try Check.message(String(repeating: "x", count: Check.maxMessageBytes + 1), "test") }
        #expect(throws: Never.self) { try Check.message(String(repeating: "x", count: Check.maxMessageBytes), "test") }
        #expect(throws: FuzzViolation.self) { try Check.doesNotEcho("bad signature abcdefghijklmnop", secret: "abcdefghijklmnop", "test") }
        #expect(throws: Never.self) { try Check.doesNotEcho("bad signature", secret: "abcdefghijklmnop", "test") }
    }
}
