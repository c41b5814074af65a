import Foundation
import PushTestSupport
import Testing

@testable import PushService

@Suite("Start-up code pages let go (issue 35)")
struct CodePagesTests {
    static let smaps = """
        55ee68c5c000-55ee6aa76000 r-xp 00000000 fd:00 1234 /usr/local/bin/pushdispatch
        Size:              30824 kB
        Rss:               19896 kB
        Private_Dirty:         0 kB
        55ee6aa76000-55ee6ab54000 r--p 01e1a000 fd:00 1234 /usr/local/bin/pushdispatch
        Rss:                 888 kB
        Private_Dirty:       888 kB
        7f0000000000-7f0000100000 r-xp 00000000 fd:00 99 /usr/lib/x86_64-linux-gnu/libc.so.6
        Rss:                1592 kB
        Private_Dirty:         4 kB
        7f0000200000-7f0000300000 rw-p 00000000 00:00 0
        Rss:                4464 kB
        Private_Dirty:      4464 kB
        7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]
        Rss:                   8 kB
        Private_Dirty:         0 kB
        7f0000400000-7f0000500000 r-xp 00000000 fd:00 77 /opt/swift/usr/lib/swift/linux/libswiftCore.so
        Rss:                   0 kB
        Private_Dirty:         0 kB
        garbage line without fields
        """

    @Test("only read-only executable file mappings with resident pages and no private dirty page are dropped")
    func droppable() {
        let mappings = CodePages.mappings(smaps: Self.smaps)
        #expect(mappings.count == 6)
        #expect(mappings[0].start == 0x55ee_68c5_c000 && mappings[0].end == 0x55ee_6aa7_6000 && mappings[0].resident == 19_896 * 1024)
        // The binary's code; not its relocated read-only data, not libc's patched code, not
        // anonymous memory, not the vDSO, not a mapping with nothing resident.
        #expect(mappings.map(\.droppable) == [true, false, false, false, false, false])
    }

    @Test("hostile smaps text: no crash, nothing droppable made up", arguments: 0..<200 as Range<UInt64>)
    func mutated(seed: UInt64) {
        var mutator = Mutator(seed: seed)
        let bytes = mutator.mutateBytes(Array(Self.smaps.utf8))
        let mappings = CodePages.mappings(smaps: String(decoding: bytes, as: UTF8.self))
        for mapping in mappings where mapping.droppable {
            #expect(mapping.end > mapping.start && mapping.resident > 0 && mapping.privateDirty == 0)
        }
    }

    #if os(Linux)
    @Test("in this process: code pages dropped, and the code still runs afterwards")
    func trimsThisProcess() throws {
        let before = try Self.residentCode()
        // The whole file, not its first read's worth.
        #expect(try #require(CodePages.procFile("/proc/self/smaps")).utf8.count > 8192)
        let dropped = CodePages.trim()
        #expect(dropped > 0)
        // Code runs (and faults its pages back in) after the trim.
        let sum = (1...1000).map { String($0) }.joined(separator: ",").split(separator: ",").count
        #expect(sum == 1000)
        #expect(try Self.residentCode() < before)
    }

    /// Resident bytes of this process's read-only executable file mappings.
    static func residentCode() throws -> Int {
        let text = try #require(CodePages.procFile("/proc/self/smaps"))
        return CodePages.mappings(smaps: text).filter { $0.permissions.hasPrefix("r-x") && $0.path.hasPrefix("/") }.map(\.resident).reduce(0, +)
    }
    #endif
}
