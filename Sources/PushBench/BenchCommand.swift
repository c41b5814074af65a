import ArgumentParser
import PushCore
import PushJSON
import PushMatching

/// `pushdispatch-bench`: the benchmarks, each beside its reference in one run
/// (docs/benchmarks.md). Build with `-c release`.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushdispatch-bench",
        abstract: "Benchmarks of pushdispatch: hot paths on one core, ingestion, the socket, restarts, deliveries (build with -c release).",
        subcommands: [BenchPayload.self, BenchParse.self, BenchV2.self, BenchIndex.self, BenchIngest.self, BenchSocket.self, BenchRestart.self, BenchDeliver.self, BenchPipeline.self, BenchSoak.self, BenchStack.self, BenchEndToEnd.self]
    )
}

struct BenchOptions: ParsableArguments {
    @Option(help: "Seconds to run each measurement.")
    var seconds: Double = 2
}

struct BenchPayload: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payload", abstract: "v1 payload building for ~1 KB values and for values near the 4064-byte limit.")

    @OptionGroup var options: BenchOptions

    func run() throws {
        var rng = BenchRandom(seed: 42)
        let cases: [(String, (inout BenchRandom) -> JSON)] = [
            ("~1 KB value", { BenchData.value(approximateBytes: 1_000, rng: &$0) }),
            ("value near the limit (payload 3,700–4,063 bytes, OK)", { BenchData.nearLimitValue(rng: &$0) }),
            ("~8 KB value (TooBig)", { BenchData.value(approximateBytes: 8_000, rng: &$0) }),
        ]
        for (label, make) in cases {
            let values = (0..<64).map { _ in make(&rng) }
            let events = values.map { Event(app: "toto", path: "/some/webcom/path", body: .value($0)) }
            let builder = V1PayloadBuilder()
            var out = JSONWriter(capacity: 8192)
            var bytes = 0
            let result = measure(seconds: options.seconds) { iteration in
                out.removeAll()
                builder.build(events[iteration & 63], into: &out)
                bytes &+= out.count
            }
            report("v1 value payload, \(label)", result, unit: "payloads", bytes: bytes)
        }
        // childEvent over a ~1 KB object with a third of its children changed.
        let pairs = (0..<64).map { _ -> Event in
            let before = BenchData.value(approximateBytes: 1_000, rng: &rng)
            let after = BenchData.mutate(before, rng: &rng)
            return Event(app: "toto", path: "/p", body: .childEvent(ChildDiff(before: before, after: after)))
        }
        let builder = V1PayloadBuilder()
        var out = JSONWriter(capacity: 8192)
        var bytes = 0
        let result = measure(seconds: options.seconds) { iteration in
            out.removeAll()
            builder.build(pairs[iteration & 63], into: &out)
            bytes &+= out.count
        }
        report("v1 childEvent payload, ~1 KB object (diff precomputed)", result, unit: "payloads", bytes: bytes)

        // The whole `payload` command path: request line → parse → normalise → build.
        let lines: [[UInt8]] = (0..<64).map { _ in
            let value = BenchData.value(approximateBytes: 1_000, rng: &rng)
            return Array("{\"app\":\"toto\",\"path\":\"/some/webcom/path\",\"mode\":\"value\",\"format\":\"v1\",\"after\":\(value)}".utf8)
        }
        var processor = PayloadLineProcessor()
        var lineBytes = 0
        let endToEnd = measure(seconds: options.seconds) { iteration in
            out.removeAll()
            let line = lines[iteration & 63]
            lineBytes &+= line.count
            _ = line.withUnsafeBufferPointer { processor.process(line: $0, into: &out) }
        }
        report("request line → v1 value payload, ~1 KB value (parse included)", endToEnd, unit: "lines", bytes: lineBytes)
    }
}

struct BenchParse: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parse", abstract: "JSON parsing throughput on realistic documents.")

    @OptionGroup var options: BenchOptions

    func run() throws {
        var rng = BenchRandom(seed: 7)
        for (label, size) in [("~1 KB documents", 1_000), ("~64 KB documents", 64_000)] {
            let documents: [[UInt8]] = (0..<32).map { _ in Array(BenchData.value(approximateBytes: size, rng: &rng).description.utf8) }
            var bytes = 0
            var members = 0
            let result = measure(seconds: options.seconds) { iteration in
                let document = documents[iteration & 31]
                bytes &+= document.count
                if case .object(let object) = try! JSONParser.parse(document) { members &+= object.count }
            }
            report("parse \(label)", result, unit: "documents", bytes: bytes)
        }
        let changeRecord = Array(#"{"seq":123456,"app":"toto","op":"patch","path":"/users/alice","data":{"name":"Alice","age":42,"tags":["a","b"],"score":12.5,"profile/city":"Paris"}}"#.utf8)
        var bytes = 0
        let result = measure(seconds: options.seconds) { _ in
            bytes &+= changeRecord.count
            _ = try! JSONParser.parse(changeRecord)
        }
        report("parse a \(changeRecord.count)-byte change record", result, unit: "records", bytes: bytes)
    }
}

/// Runs `body` repeatedly for about `seconds`; returns iterations and elapsed seconds.
func measure(seconds: Double, _ body: (Int) -> Void) -> (iterations: Int, seconds: Double) {
    let clock = ContinuousClock()
    // Warm up.
    for i in 0..<1_000 { body(i) }
    var iterations = 0
    let start = clock.now
    let deadline = start.advanced(by: .milliseconds(Int64(seconds * 1000)))
    while true {
        for _ in 0..<256 {
            body(iterations)
            iterations += 1
        }
        if clock.now >= deadline { break }
    }
    let elapsed = clock.now - start
    let (s, attoseconds) = elapsed.components
    return (iterations, Double(s) + Double(attoseconds) / 1e18)
}

func report(_ label: String, _ result: (iterations: Int, seconds: Double), unit: String, bytes: Int) {
    let rate = Double(result.iterations) / result.seconds
    let megabytes = Double(bytes) / result.seconds / 1_000_000
    let average = bytes / max(result.iterations, 1)
    print("\(label): \(Int(rate)) \(unit)/s, \(String(format1: megabytes)) MB/s (avg \(average) bytes each)")
}

extension String {
    init(format1 value: Double) {
        let scaled = (value * 10).rounded() / 10
        self = "\(scaled)"
    }
}

/// xorshift64*: reproducible data without Foundation.
struct BenchRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 | 1 }
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
}

/// Realistic JSON values: objects of records with names, numbers, flags, nested profiles.
enum BenchData {
    static let words = ["alice", "bob", "carol", "dave", "status", "online", "message", "Paris", "Zürich", "東京",
                        "hello world", "a \"quoted\" word", "path/with/slashes", "line\nbreak", "emoji 😀"]

    static func value(approximateBytes: Int, rng: inout BenchRandom) -> JSON {
        var members: [(Key, JSON)] = []
        var size = 2
        var index = 0
        while size < approximateBytes {
            let key = Key("item-\(index)")
            let child = record(rng: &rng)
            size += key.string.utf8.count + 4 + child.description.utf8.count
            members.append((key, child))
            index += 1
        }
        return .object(JSONObject(members))
    }

    /// A value whose v1 value payload is just under the limit: members are dropped from a
    /// larger value until the payload fits.
    static func nearLimitValue(rng: inout BenchRandom) -> JSON {
        guard case .object(var object) = value(approximateBytes: 4_000, rng: &rng) else { fatalError() }
        let builder = V1PayloadBuilder()
        while true {
            let (bytes, status) = builder.build(Event(app: "toto", path: "/some/webcom/path", body: .value(.object(object))))
            if status == .ok && bytes.count >= 3_700 { return .object(object) }
            if status == .ok { return value(approximateBytes: 3_000, rng: &rng) }
            object.remove(object.keys.last!)
        }
    }

    static func record(rng: inout BenchRandom) -> JSON {
        [
            "name": .string(words[Int(rng.next() % UInt64(words.count))]),
            "count": .int(Int64(rng.next() % 100_000)),
            "score": .double(Double(rng.next() % 10_000) / 7),
            "active": .bool(rng.next() % 2 == 0),
            "profile": ["city": .string(words[Int(rng.next() % UInt64(words.count))]), "level": .int(Int64(rng.next() % 10))],
        ]
    }

    static func mutate(_ value: JSON, rng: inout BenchRandom) -> JSON {
        guard case .object(var object) = value else { return value }
        for key in object.keys where rng.next() % 3 == 0 {
            if rng.next() % 2 == 0 { object.remove(key) } else { object.set(key, to: record(rng: &rng)) }
        }
        object.set(Key("new-\(rng.next() % 1000)"), to: record(rng: &rng))
        return .object(object)
    }
}
