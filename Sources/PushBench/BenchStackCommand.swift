import ArgumentParser
import Foundation
import PushJSON
import PushMatching

/// `pushdispatch-bench stack`: how much of a thread's stack each walk over the deepest
/// documents accepted uses (issue 33). The thread's stack is painted with a pattern before the
/// walk; the deepest byte the walk changed is how far it went.
struct BenchStack: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stack",
        abstract: "Thread stack used by parsing, serialising, comparing, freeing and building a payload from documents nested to the depth limit.")

    func run() async throws {
        // Each walk at the limit and at half of it: the difference is what a level costs.
        let depth = JSONParser.maxDepth
        print("walk over documents nested \(depth) deep (\(depth / 2) deep): stack used, and per level")
        for (label, make) in Self.documents {
            var used: [[Int]] = []
            for levels in [depth, depth / 2] {
                used.append(await Self.walks(make(levels), inner: make(levels - 1)))
            }
            for (index, walk) in Self.walkNames.enumerated() {
                let (full, half) = (used[0][index], used[1][index])
                print("\(walk), \(label): \(full / 1024) KiB (\(half / 1024) KiB), \(max(0, full - half) / (depth - depth / 2)) bytes a level")
            }
        }
    }

    static let documents: [(String, @Sendable (Int) -> String)] = [
        ("arrays", { String(repeating: "[1,", count: $0) + "1" + String(repeating: "]", count: $0) }),
        ("objects", { String(repeating: #"{"b":true,"a":"#, count: $0) + "1" + String(repeating: "}", count: $0) }),
    ]

    static let walkNames = ["parse", "serialise", "compare (==) with a copy", "free", "payload line → v1 payload (one level less)"]

    /// The stack each walk uses over `document`, less that of an empty walk.
    /// `inner`, one level less deep, goes into a request line (which wraps it in an object).
    static func walks(_ document: String, inner: String) async -> [Int] {
        let bytes = Array(document.utf8)
        let inner = Array(inner.utf8)
        let line = Array(#"{"app":"toto","path":"/p","mode":"value","format":"v1","after":"#.utf8) + inner + Array("}".utf8)
        let kept = Kept()
        let bodies: [@Sendable () -> Void] = [
            { kept.value = try? JSONParser.parse(bytes) },
            { kept.text = kept.value?.description },
            { kept.equal = kept.value == kept.copy },
            { kept.value = nil },
            {
                var processor = PayloadLineProcessor()
                var out = JSONWriter(capacity: 8192)
                kept.equal = line.withUnsafeBufferPointer { processor.process(line: $0, into: &out) }
            },
        ]
        kept.copy = try? JSONParser.parse(bytes)
        let baseline = await stackUsed {}
        var used: [Int] = []
        for body in bodies {
            used.append(max(0, await stackUsed(body) - baseline))
        }
        precondition(kept.equal, "the request line did not give a payload")
        return used
    }

    /// What the walks keep between them, so that each one is measured alone.
    final class Kept: @unchecked Sendable {
        var value: JSON?
        var copy: JSON?
        var text: String?
        var equal = false
    }

    /// Bytes of stack `body` used, on a thread with a 16 MiB stack.
    static func stackUsed(_ body: @escaping @Sendable () -> Void) async -> Int {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: paintedRun(body)) }
            thread.stackSize = 16 << 20
            thread.start()
        }
    }

    @inline(never)
    static func paintedRun(_ body: () -> Void) -> Int {
        var marker = 0
        let here = withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
        guard let low = stackLow(containing: here) else { return -1 }
        // From well above the guard page to a little below this frame (memset's own frame).
        let start = low + 64 * 1024
        let end = here - 4096
        let painted = UnsafeMutableRawPointer(bitPattern: start)!
        memset(painted, 0xA5, Int(end - start))
        body()
        let bytes = UnsafeRawPointer(painted).assumingMemoryBound(to: UInt8.self)
        var offset = 0
        while offset < Int(end - start), bytes[offset] == 0xA5 { offset += 1 }
        return Int(here - (start + UInt(offset)))
    }

    /// The low end of the mapping holding `address` (this thread's stack), from /proc/self/maps.
    static func stackLow(containing address: UInt) -> UInt? {
        guard let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8) else { return nil }
        for line in maps.split(separator: "\n") {
            let bounds = line.split(separator: " ")[0].split(separator: "-")
            guard bounds.count == 2, let low = UInt(bounds[0], radix: 16), let high = UInt(bounds[1], radix: 16) else { continue }
            if low <= address && address < high { return low }
        }
        return nil
    }
}
