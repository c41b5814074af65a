import Foundation
import Testing

/// The README's "For app developers" example is the source of an app target
/// (`Examples/ReadmeApp`, built with the package): what an app developer copies compiles.
@Suite("The README's example for app developers is an app that compiles")
struct ReadmeExampleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The Swift blocks of the README's "For app developers" section.
    static func swiftBlocks() throws -> [String] {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let start = readme.range(of: "\n## For app developers\n") else { return [] }
        let section = readme[start.upperBound...]
        let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
        var blocks: [String] = []
        var rest = section[..<end]
        while let open = rest.range(of: "```swift\n") {
            guard let close = rest[open.upperBound...].range(of: "\n```") else { break }
            blocks.append(String(rest[open.upperBound..<close.lowerBound]) + "\n")
            rest = rest[close.upperBound...]
        }
        return blocks
    }

    @Test("the README's example is Examples/ReadmeApp/main.swift, to the byte")
    func sameText() throws {
        let source = try String(contentsOf: Self.root.appendingPathComponent("Examples/ReadmeApp/main.swift"), encoding: .utf8)
        let blocks = try Self.swiftBlocks()
        let same = blocks.contains(source)
        #expect(same, "the README's example and Examples/ReadmeApp/main.swift differ: copy one onto the other")
    }

    @Test("the example app imports PushDispatchClient and Foundation, nothing else")
    func imports() throws {
        for file in ["main.swift", "YourApp.swift"] {
            let source = try String(contentsOf: Self.root.appendingPathComponent("Examples/ReadmeApp/\(file)"), encoding: .utf8)
            let imports = source.split(separator: "\n").filter { $0.hasPrefix("import ") || $0.contains(" import ") }.map(String.init)
            #expect(imports == ["import Foundation", "import PushDispatchClient"], "\(file): \(imports)")
        }
    }

    @Test("the manifest snippet names the package by URL, as the README says it must")
    func manifest() throws {
        let manifest = try Self.swiftBlocks().first { $0.contains(".product(name: \"PushDispatchClient\"") }
        #expect(manifest?.contains(".package(url: ") == true)
    }
}
