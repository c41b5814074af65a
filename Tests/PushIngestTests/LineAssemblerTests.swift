import NIOCore
@testable import PushIngest
import PushTestSupport
import Testing

@Suite("Splitting a socket's bytes into lines")
struct LineAssemblerTests {
    /// What the assembler should give for `stream`: each line, or (over `max`) its length.
    enum Expected: Equatable, CustomStringConvertible {
        case line([UInt8])
        case tooLong(prefix: [UInt8], length: Int)

        /// Short enough to read in a failure: lengths and a checksum.
        var description: String {
            func sum(_ bytes: [UInt8]) -> Int { bytes.reduce(0) { ($0 &* 31 &+ Int($1)) & 0xFFFFFF } }
            switch self {
            case .line(let bytes): return "line(\(bytes.count) bytes, sum \(sum(bytes)))"
            case .tooLong(let prefix, let length): return "tooLong(prefix \(prefix.count) bytes, sum \(sum(prefix)), length \(length))"
            }
        }
    }

    static func reference(_ stream: [UInt8], max: Int, closed: Bool) -> [Expected] {
        var parts = stream.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map(Array.init)
        let last = parts.removeLast()  // after the last newline: unfinished (or empty)
        if closed && !last.isEmpty { parts.append(last) }
        return parts.map { line in
            line.count > max ? .tooLong(prefix: Array(line.prefix(LineAssembler.prefixBytes)), length: line.count) : .line(line)
        }
    }

    static func run(_ stream: [UInt8], max: Int, chunks: [Int], closed: Bool) -> [Expected] {
        var assembler = LineAssembler(maxLength: max)
        var frames: [Expected] = []
        func take(_ frame: SocketFrame) {
            switch frame {
            case .line(let buffer): frames.append(.line(Array(buffer.readableBytesView)))
            case .tooLong(let prefix, let length): frames.append(.tooLong(prefix: Array(prefix.readableBytesView), length: length))
            }
        }
        var offset = 0
        var sizes = chunks.makeIterator()
        while offset < stream.count {
            let size = min(stream.count - offset, Swift.max(1, sizes.next() ?? stream.count))
            assembler.append(ByteBuffer(bytes: stream[offset..<offset + size]))
            offset += size
            while let frame = assembler.next() { take(frame) }
            // Never more than the unfinished line (or 64 KiB of one over the limit) and the last chunk.
            #expect(assembler.heldBytes <= Swift.max(max, LineAssembler.prefixBytes) + size)
        }
        if closed, let frame = assembler.finish() { take(frame) }
        return frames
    }

    @Test(
        "lines, in chunks of every size",
        arguments: [
            ("a\nbc\n", 10, [1], true),
            ("a\nbc\n", 10, [100], true),
            ("\n\n", 10, [1], true),
            ("no newline at the end", 100, [3], true),
            ("no newline at the end", 100, [3], false),
            ("exactly10!\n", 10, [4], true),
            ("eleven byte\nok\n", 10, [5], true),
            ("eleven byte\nok\n", 10, [50], true),
            ("over the limit and never ended", 10, [4], true),
        ] as [(String, Int, [Int], Bool)])
    func table(text: String, max: Int, chunks: [Int], closed: Bool) {
        let stream = Array(text.utf8)
        let got = Self.run(stream, max: max, chunks: Array(repeating: chunks[0], count: stream.count), closed: closed)
        let expected = Self.reference(stream, max: max, closed: closed)
        #expect(got == expected, "\(got.map(\.description)) ≠ \(expected.map(\.description))")
    }

    @Test("seeded random streams cut at random: the same lines as splitting the whole, nothing held beyond bounds")
    func random() {
        var random = SeededRandom(seed: 22)
        for _ in 0..<200 {
            let max = random.pick([1, 5, 64, 1000, 70_000])
            var stream: [UInt8] = []
            for _ in 0..<random.below(20) {
                let length = random.pick([0, 1, max - 1, max, max + 1, random.below(3 * max + 2), 150_000])
                var line = Array(repeating: UInt8(ascii: "a") + UInt8(random.below(26)), count: Swift.max(0, length))
                for _ in 0..<Swift.min(line.count, 8) { line[random.below(line.count)] = UInt8(ascii: "A") + UInt8(random.below(26)) }
                stream += line
                if random.chance(90) { stream.append(UInt8(ascii: "\n")) }
            }
            let small = stream.count < 4096
            let chunks = (0..<64).map { _ in random.pick(small ? [1, 2, 7, 100] : [3, 999, 4096, 65_536, random.below(200_000) + 1]) }
            let closed = random.chance(50)
            let got = Self.run(stream, max: max, chunks: chunks, closed: closed)
            let expected = Self.reference(stream, max: max, closed: closed)
            #expect(got == expected, "\(got.map(\.description)) ≠ \(expected.map(\.description))")
        }
    }
}
