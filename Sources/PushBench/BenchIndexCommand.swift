import ArgumentParser
import PushCore
import PushMatching

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

struct BenchIndex: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "index",
        abstract: "Subscription index: bulk load, memory, matching for writes at depths 1 to 6, removals.")

    enum Shape: String, ExpressibleByArgument, CaseIterable {
        case users, mixed, all
    }

    @OptionGroup var options: BenchOptions

    @Option(help: "Number of subscriptions to load.")
    var subscriptions: Int = 1_000_000

    @Option(help: "Data shape: users (/users/{uid}/notifications), mixed (users, rooms, presence…), or all.")
    var shape: Shape = .all

    func validate() throws {
        guard subscriptions >= 100 else { throw ValidationError("--subscriptions must be at least 100") }
    }

    func run() throws {
        if shape != .mixed { bench(BenchIndexData.users(count: subscriptions)) }
        if shape != .users { bench(BenchIndexData.mixed(count: subscriptions)) }
    }

    private func bench(_ data: BenchIndexData) {
        let count = data.subscriptions.count
        print("== \(data.title): \(count) subscriptions, generated in random order")
        let items = data.subscriptions.map { (app: data.app, path: $0.path, entry: $0.entry) }

        // 1. The start-up load: everything at once, laid out in path order, sized exactly.
        var (index, seconds, rssGrowth) = load(count) { SubscriptionIndex(bulkLoading: items) }
        print("load 1, init(bulkLoading:): \(twoDecimals(seconds)) s = \(Int(Double(count) / seconds)) inserts/s")
        printMemory(index, rssGrowth: rssGrowth, subscriptions: count)
        measureLookups(index, data)
        measureFanOuts(index, data)
        measureRemovals(&index, data)
        index = SubscriptionIndex()

        // 2. One insert at a time in random order, capacity reserved: nodes and entries are
        //    scattered in memory, as after a long run of churn.
        (index, seconds, rssGrowth) = load(count) {
            var index = SubscriptionIndex(minimumCapacity: count)
            for item in items { index.insert(app: item.app, path: item.path, entry: item.entry) }
            return index
        }
        print("load 2, init(minimumCapacity: \(count)) then insert in random order: \(twoDecimals(seconds)) s = \(Int(Double(count) / seconds)) inserts/s")
        printMemory(index, rssGrowth: rssGrowth, subscriptions: count)
        measureLookups(index, data)
        index = SubscriptionIndex()

        // 3. No capacity hint: every array and table grows as it fills.
        (index, seconds, rssGrowth) = load(count) {
            var index = SubscriptionIndex()
            for item in items { index.insert(app: item.app, path: item.path, entry: item.entry) }
            return index
        }
        print("load 3, init() then insert in random order: \(twoDecimals(seconds)) s = \(Int(Double(count) / seconds)) inserts/s")
        printMemory(index, rssGrowth: rssGrowth, subscriptions: count)
        print()
    }

    private func measureLookups(_ index: SubscriptionIndex, _ data: BenchIndexData) {
        for (label, writes) in data.writes {
            let profile = MatchProfile(index, app: data.app, writes: writes)
            var sink = 0
            let result = measure(seconds: options.seconds) { iteration in
                index.forEachMatch(app: data.app, path: writes[iteration & (writes.count - 1)]) { _, _, entries in
                    for entry in entries { sink &+= Int(truncatingIfNeeded: entry.handle) }
                }
            }
            precondition(sink != 1, "keeps the loop alive")
            print("  lookup \(label): \(Int(Double(result.iterations) / result.seconds)) lookups/s; per write \(profile)")
        }
    }

    private func measureFanOuts(_ index: SubscriptionIndex, _ data: BenchIndexData) {
        for (label, write) in data.fanOuts {
            let profile = MatchProfile(index, app: data.app, writes: [write])
            var sink = 0
            let rounds = 5
            let seconds = timed {
                for _ in 0..<rounds {
                    index.forEachMatch(app: data.app, path: write) { _, _, entries in
                        for entry in entries { sink &+= Int(truncatingIfNeeded: entry.handle) }
                    }
                }
            }
            precondition(sink != 1, "keeps the loop alive")
            let perWrite = seconds / Double(rounds)
            print("  fan-out \(label): \(twoDecimals(perWrite * 1000)) ms per write = \(Int(Double(profile.entries) / perWrite)) entries/s; per write \(profile)")
        }
    }

    /// Removes every subscription in random order: a tenth, then the rest (pruning included).
    private func measureRemovals(_ index: inout SubscriptionIndex, _ data: BenchIndexData) {
        let count = data.subscriptions.count
        var order = Array(0..<count)
        var rng = BenchRandom(seed: 99)
        order.shuffle(using: &rng)
        let tenth = count / 10
        for (label, range) in [("a random tenth", 0..<tenth), ("the remaining nine tenths", tenth..<count)] {
            let seconds = timed {
                for position in range {
                    let subscription = data.subscriptions[order[position]]
                    let removed = index.remove(app: data.app, path: subscription.path, handle: subscription.entry.handle)
                    precondition(removed, "every subscription is in the index once")
                }
            }
            print("  remove \(label): \(range.count) in \(twoDecimals(seconds)) s = \(Int(Double(range.count) / seconds)) removals/s (\(twoDecimals(seconds / Double(range.count) * 1e9)) ns each)")
        }
        precondition(index.count == 0 && index.statistics.nodes == 0, "the index is empty")
        print("  after removing everything: footprint \(index.footprint) bytes (capacity is kept)")
    }

    /// Builds an index; returns it, the seconds taken and the RSS growth, as the process sees
    /// it and after `malloc_trim` (which returns the free heap pages, such as those of arrays
    /// that grew or of the bulk load's temporaries, that the allocator keeps for reuse).
    private func load(_ count: Int, _ build: () -> SubscriptionIndex) -> (SubscriptionIndex, Double, RSSGrowth?) {
        let before = ProcessMemory.residentBytesAfterTrim()
        var index = SubscriptionIndex()
        let seconds = timed { index = build() }
        precondition(index.count == count, "every subscription is distinct")
        let after = ProcessMemory.residentBytes()
        let afterTrim = ProcessMemory.residentBytesAfterTrim()
        let growth = before.flatMap { before in
            after.flatMap { after in afterTrim.map { RSSGrowth(raw: after - before, trimmed: $0 - before) } }
        }
        return (index, seconds, growth)
    }

    struct RSSGrowth {
        var raw: Int
        var trimmed: Int
    }

    private func printMemory(_ index: SubscriptionIndex, rssGrowth: RSSGrowth?, subscriptions: Int) {
        let statistics = index.statistics
        let perSubscription = { (bytes: Int) in twoDecimals(Double(bytes) / Double(subscriptions)) }
        print("nodes: \(statistics.nodes), key bytes: \(statistics.liveKeyBytes)")
        print("footprint: \(perSubscription(index.footprint)) bytes/subscription (nodes \(perSubscription(statistics.nodeBytes)), "
            + "key arena \(perSubscription(statistics.keyArenaBytes)), edge table \(perSubscription(statistics.edgeTableBytes)), "
            + "entries \(perSubscription(statistics.entryBytes)), handle table \(perSubscription(statistics.handleTableBytes)))")
        print("RSS growth: " + (rssGrowth.map {
            "\(perSubscription($0.raw)) bytes/subscription (\(perSubscription($0.trimmed)) after malloc_trim)"
        } ?? "n/a (no /proc/self/statm)"))
    }
}

/// What the writes of one measurement matched: entries per write (average, minimum, maximum)
/// and how they split between ancestors, the node itself and descendants.
struct MatchProfile: CustomStringConvertible {
    var entries = 0
    var minimum = Int.max
    var maximum = 0
    var writes = 0
    var byRelation = [0, 0, 0]
    var nodes = 0

    init(_ index: SubscriptionIndex, app: String, writes: [Path]) {
        for write in writes {
            var here = 0
            index.forEachMatch(app: app, path: write) { relation, _, matched in
                let count = matched.reduce(0) { count, _ in count + 1 }
                here += count
                nodes += 1
                byRelation[relation == .ancestor ? 0 : relation == .same ? 1 : 2] += count
            }
            entries += here
            minimum = min(minimum, here)
            maximum = max(maximum, here)
        }
        self.writes = writes.count
    }

    var description: String {
        let average = { (total: Int) in twoDecimals(Double(total) / Double(max(writes, 1))) }
        return "\(average(entries)) entries (min \(minimum), max \(maximum)) at \(average(nodes)) nodes: "
            + "\(average(byRelation[0])) ancestor, \(average(byRelation[1])) same, \(average(byRelation[2])) descendant"
    }
}

/// Resident memory from `/proc/self/statm` (Linux), after returning free heap pages to the
/// system so that memory freed earlier in the run and reused does not hide growth.
enum ProcessMemory {
    static func residentBytesAfterTrim() -> Int? {
        // glibc's `malloc_trim` is not in the Glibc module (it lives in <malloc.h>): look it up.
        if let symbol = dlsym(dlopen(nil, RTLD_NOW), "malloc_trim") {
            typealias MallocTrim = @convention(c) (Int) -> Int32
            _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
        }
        return residentBytes()
    }

    static func residentBytes() -> Int? {
        let descriptor = open("/proc/self/statm", O_RDONLY)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let length = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard length > 0 else { return nil }
        // "size resident shared text lib data dt", in pages.
        let fields = buffer[..<length].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

func timed(_ body: () -> Void) -> Double {
    let clock = ContinuousClock()
    let start = clock.now
    body()
    let (seconds, attoseconds) = (clock.now - start).components
    return Double(seconds) + Double(attoseconds) / 1e18
}

/// Two decimals.
func twoDecimals(_ value: Double) -> String {
    let scaled = (value * 100).rounded() / 100
    return "\(scaled)"
}
