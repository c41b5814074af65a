import Foundation
import Testing

/// `docs/architecture.md` says which modules there are and what each may import; `Package.swift`
/// says what they do import. A document that drifts from the package fails here.
@Suite("docs/architecture.md: the module table matches Package.swift")
struct ArchitectureDocumentTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Every target of the package (test targets left out) and the targets of ours it depends on.
    static func packageTargets() throws -> [String: Set<String>] {
        let text = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        var targets: [String: [String]] = [:]
        var scanner = text[...]
        // `.target(` or `.executableTarget(`, then `name: "X"`, then an optional
        // `dependencies: [ … ]` whose string literals are targets of ours (products are
        // `.product(name: …, package: …)`, skipped).
        while let start = scanner.range(of: #"\.(target|executableTarget)\("#, options: .regularExpression) {
            scanner = scanner[start.upperBound...]
            guard let nameRange = scanner.range(of: #"name: "[^"]+""#, options: .regularExpression) else { break }
            let name = String(scanner[nameRange].dropFirst(7).dropLast())
            // This target's text ends where the next one starts.
            let end = scanner.range(of: #"\.(target|executableTarget|testTarget)\("#, options: .regularExpression)?.lowerBound ?? scanner.endIndex
            let body = scanner[nameRange.upperBound..<end]
            var dependencies: [String] = []
            if let open = body.range(of: "dependencies: [") {
                var depth = 1
                var index = open.upperBound
                var list = ""
                while index < body.endIndex, depth > 0 {
                    let character = body[index]
                    if character == "[" { depth += 1 }
                    if character == "]" { depth -= 1 }
                    if depth > 0 { list.append(character) }
                    index = body.index(after: index)
                }
                // String literals not preceded by `name: ` or `package: `.
                let literal = try Regex(#"(name: |package: )?"([A-Za-z0-9_-]+)""#)
                for match in list.matches(of: literal) where match.output[1].substring == nil {
                    if let value = match.output[2].substring { dependencies.append(String(value)) }
                }
            }
            targets[name] = dependencies
        }
        let ours = Set(targets.keys)
        return targets.mapValues { Set($0.filter(ours.contains)) }
    }

    /// The module table: module → the modules of ours it may import.
    static func documentedModules() throws -> [String: Set<String>] {
        let text = try String(contentsOf: root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        guard let section = text.components(separatedBy: "## Modules and what each may import").dropFirst().first?.components(separatedBy: "\n## ").first else {
            throw DocumentError(description: "docs/architecture.md has no section \"Modules and what each may import\"")
        }
        var modules: [String: Set<String>] = [:]
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count > 3 else { continue }
            // `pushdispatch-bench` (`Sources/PushBench`): the target's name comes first.
            guard let name = cells[1].split(separator: "`").first.map(String.init) else { continue }
            let imports = cells[3].split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            modules[name] = Set(imports)
        }
        return modules
    }

    struct DocumentError: Error, CustomStringConvertible {
        var description: String
    }

    @Test("every module of Package.swift has a row, and no row names a module that is not there")
    func sameModules() throws {
        let package = try Self.packageTargets()
        let document = try Self.documentedModules()
        #expect(package.count >= 15, "Package.swift read as \(package.keys.sorted())")
        #expect(Set(document.keys) == Set(package.keys), "only in Package.swift: \(Set(package.keys).subtracting(document.keys).sorted()); only in the document: \(Set(document.keys).subtracting(package.keys).sorted())")
    }

    @Test("each module imports exactly the modules of ours its row names (in backquotes in the third column)")
    func sameImports() throws {
        let package = try Self.packageTargets()
        let document = try Self.documentedModules()
        for (name, dependencies) in package.sorted(by: { $0.key < $1.key }) {
            guard let documented = document[name] else { continue }
            #expect(documented == dependencies, "\(name): Package.swift \(dependencies.sorted()), docs/architecture.md \(documented.sorted())")
        }
    }

    @Test("the product executable's dependency closure holds no test-only module")
    func productWithoutTestCode() throws {
        let package = try Self.packageTargets()
        var closure: Set<String> = []
        var queue = ["pushdispatch"]
        while let next = queue.popLast() {
            for dependency in package[next] ?? [] where closure.insert(dependency).inserted { queue.append(dependency) }
        }
        #expect(!closure.contains("PushTestSupport"), "\(closure.sorted())")
        #expect(closure.contains("PushService"), "the closure was read as \(closure.sorted())")
    }

    @Test("the app library's dependency closure holds the pure layers it uses and nothing of the server")
    func appLibraryWithoutServerCode() throws {
        let package = try Self.packageTargets()
        var closure: Set<String> = []
        var queue = ["PushDispatchClient"]
        while let next = queue.popLast() {
            for dependency in package[next] ?? [] where closure.insert(dependency).inserted { queue.append(dependency) }
        }
        let ours = Set(package.keys)
        #expect(closure.intersection(ours) == ["PushJSON", "PushCore", "PushJOSE"], "\(closure.intersection(ours).sorted())")
    }
}
