import PushTestSupport
import Testing
@testable import PushCore

@Suite("Paths (SPEC §2)")
struct PathTests {
    @Test("paths normalise to canonical form", arguments: [
        ("/", "/"), ("", "/"), ("a", "/a"), ("/a/", "/a"), ("a//b/./c/..", "/a/b"), ("/..", "/"), ("../a", "/a"),
        ("/a/b/../../..", "/"), ("/./a/./", "/a"), ("/-1/01/é", "/-1/01/é"), ("///x///y", "/x/y"),
    ])
    func normalisation(input: String, canonical: String) throws {
        #expect(try Path(input).string == canonical)
    }

    /// Parsing keeps a canonical text as the path's string: over seeded texts of `/`, `.`,
    /// `..` and short keys, the string is always the keys joined, and the keys those of a
    /// plain normalisation (the definition of SPEC §2, written out here independently).
    @Test("the string is the canonical join of the keys, for seeded texts of slashes, dots and keys", arguments: [1, 2, 3] as [UInt64])
    func canonicalString(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        let pieces = ["/", "/", "/", ".", "..", "a", "bc", "é", "..", "/."]
        for _ in 0..<3_000 {
            let text = (0..<Int.random(in: 0...8, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
            var expected: [String] = []
            for segment in text.split(separator: "/", omittingEmptySubsequences: true) {
                if segment == "." { continue }
                if segment == ".." {
                    if !expected.isEmpty { expected.removeLast() }
                    continue
                }
                expected.append(String(segment))
            }
            let path: Path
            do {
                path = try Path(text)
            } catch {
                // Only a key holding `.` is refused here.
                #expect(expected.contains { $0.contains(".") }, "\(text): \(error)")
                continue
            }
            #expect(path.keys.map(\.string) == expected, "\(text)")
            #expect(path.string == "/" + expected.joined(separator: "/"), "\(text)")
        }
    }

    @Test("bad keys are rejected with the reason", arguments: [
        ("/a.b", "contains '.'"), ("/a$", "contains '$'"), ("/a#", "contains '#'"), ("/a[0]", "contains '['"),
        ("/x]", "contains ']'"), ("/tab\tkey", "control character U+0009"), ("/del\u{7F}", "control character U+007F"),
        ("/nul\u{0}", "control character U+0000"),
    ])
    func badKeys(input: String, reason: String) {
        #expect {
            try Path(input)
        } throws: { error in
            (error as? PathError)?.description.contains(reason) == true
        }
    }

    @Test("keys are limited to 768 bytes and paths to 2048")
    func limits() throws {
        _ = try Path("/" + String(repeating: "k", count: 768))
        _ = try Path("/" + String(repeating: "é", count: 384))  // 768 bytes
        #expect(throws: PathError(.keyTooLong(key: String(repeating: "k", count: 769), bytes: 769))) {
            try Path("/" + String(repeating: "k", count: 769))
        }
        let segment = "/" + String(repeating: "a", count: 511)  // 512 bytes
        let exact = try Path(String(repeating: segment, count: 4))
        #expect(exact.string.utf8.count == 2048)
        #expect(throws: PathError(.pathTooLong(bytes: 2049))) {
            try Path(String(repeating: segment, count: 4) + "b")
        }
        // The limit is on the canonical form: ".." segments don't count.
        _ = try Path(String(repeating: segment, count: 4) + "/x/..")
    }

    @Test("patch keys are strict relative paths", arguments: [
        ("a", true), ("a/b", true), ("a/b/c", true), ("", false), ("/a", false), ("a/", false), ("a//b", false),
        ("a/./b", false), ("a/..", false), ("a.b", false),
    ])
    func strictRelative(input: String, valid: Bool) {
        #expect(((try? Path.strictRelativeKeys(input)) != nil) == valid)
    }
}
