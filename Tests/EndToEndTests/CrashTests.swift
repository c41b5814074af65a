import Foundation
import PushCore
import PushJOSE
import PushJSON
import PushMatching
import PushStore
import PushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Kill -9 at random points while `pushdispatch run` consumes a stream (SPEC §4 "Durability"):
/// after each restart it goes on where it stopped, and in the end the outbox and the trees are
/// those of a run that was never interrupted: nothing lost, nothing duplicated.
@Suite("Crashes while ingesting", .processLevel, .serialized)
struct CrashTests {
    static let keys = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures/jose/test-keyset.json").path

    /// A seeded stream over overlapping paths: puts, patches, deletes, no-ops, revokes and bad
    /// lines.
    static func stream(seed: UInt64, count: Int) -> [String] {
        var random = SplitMix(seed: seed)
        let keys = ["a", "b", "c", "0", "1", "é"]
        func path(_ depth: Int) -> String { "/" + (0..<depth).map { _ in keys[random.below(keys.count)] }.joined(separator: "/") }
        var lines: [String] = []
        for seq in 1...count {
            let app = random.below(5) == 0 ? "other" : "toto"
            switch random.below(20) {
            case 0:
                lines.append("not a record \(seq)")
            case 1:
                lines.append(#"{"seq":\#(seq),"app":"\#(app)","op":"revoke","path":"\#(path(1))","reason":"disabled"}"#)
            case 2...7:
                lines.append(
                    #"{"seq":\#(seq),"app":"\#(app)","op":"patch","path":"\#(path(random.below(2)))","data":{"\#(keys[random.below(3)])/x":\#(random.below(9)),"\#(keys[3 + random.below(3)])":\#(random.below(4) == 0 ? "null" : "\"v\(seq)\"")}}"#)
            default:
                let value = random.below(5) == 0 ? "null" : #"{"n":\#(random.below(100)),"s":"\#(seq)"}"#
                lines.append(#"{"seq":\#(seq),"app":"\#(app)","op":"put","path":"\#(path(1 + random.below(3)))","data":\#(value)}"#)
            }
        }
        return lines
    }

    struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    }

    /// A folder with a configuration and a store holding subscriptions of every kind, mode and
    /// format whose payloads are deterministic (v1, webhooks, v2 signed with HS256).
    static func prepare() async throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let config = """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson, deadLetter: ./dead.ndjson, snapshotAfter: 4KiB}
            http: {port: 0}
            delivery: {enabled: false}
            expiry: {interval: 30s}
            apps:
              toto:
                keys: \(keys)
                signingKey: sig-hs
                webhooks: {orders: {url: "https://example.com/hooks", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
                subscriptions: {maxWeight: 2KiB}
              other:
                keys: \(keys)
                signingKey: sig-hs
            """
        try Data(config.utf8).write(to: folder.appendingPathComponent("pushdispatch.yaml"))
        let store = try SQLiteStore(path: folder.appendingPathComponent("store.db").path)
        var count = 0
        for app in ["toto", "other"] {
            for path in ["/", "/a", "/a/b", "/b", "/c/0", "/a/a/a", "/é"] {
                for (mode, format, kind) in [
                    (Mode.value, PayloadFormat.v1, SubscriptionKind.fcm), (.childEvent, .v1, .hms), (.noData, .v2, .fcm),
                    (.childEvent, .v2, .fcm), (.value, .v2, .webhook),
                ] where kind != .webhook || app == "toto" {
                    count += 1
                    let tuple = SubscriptionTuple(
                        app: app, uid: "u\(count % 3)", kind: kind, destination: kind == .webhook ? "orders" : nil, path: try Path(path),
                        context: "token-\(count)")
                    _ = try await store.save(
                        Subscription(
                            id: SubscriptionID.derive(tuple), tuple: tuple, mode: mode, format: format, encryption: nil, createdAt: 1,
                            expiresAt: 4_000_000_000), allowUpdate: false)
                }
            }
        }
        return folder
    }

    static func start(_ folder: URL) throws -> Process {
        let process = TestProcesses.make(Executable.url, ["run", "--config", folder.appendingPathComponent("pushdispatch.yaml").path, "--log-level", "error"])
        process.currentDirectoryURL = folder
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try TestProcesses.launch(process)
        return process
    }

    static func append(_ lines: ArraySlice<String>, to folder: URL) throws {
        let url = folder.appendingPathComponent("changes.ndjson")
        if !FileManager.default.fileExists(atPath: url.path) { #expect(FileManager.default.createFile(atPath: url.path, contents: nil)) }
        let handle = try FileHandle(forWritingTo: url)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(lines.map { $0 + "\n" }.joined().utf8))
        try handle.close()
    }

    /// Waits until the service has consumed the whole queue file.
    static func waitUntilConsumed(_ folder: URL, timeout: Double = 120) async throws -> Bool {
        let size = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent("changes.ndjson").path)[.size] as! Int
        let store = try SQLiteStore(readingOnly: folder.appendingPathComponent("store.db").path)
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if let checkpoint = try? await store.checkpoints().first(where: { $0.source == "queue-file" }), checkpoint.position == Int64(size) {
                return true
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// What must come out equal: the outbox in order, and every application's tree.
    static func outcome(_ folder: URL) async throws -> (outbox: [String], trees: [String: String]) {
        let store = try SQLiteStore(readingOnly: folder.appendingPathComponent("store.db").path)
        let outbox = try await store.notifications(limit: 1_000_000).map { stored in
            "\(stored.entry.subscriptionID) \(stored.entry.recordSeq.map(String.init) ?? "-") \(stored.entry.notification.rawValue) "
                + String(decoding: stored.entry.payload, as: UTF8.self)
        }
        var trees: [String: String] = [:]
        for app in try await store.treeApplications() {
            let stored = try await store.tree(app: app)
            var tree = DataTree(root: try stored.snapshot.map { try JSONParser.parse($0) }.flatMap { $0.isNull ? nil : $0 })
            for row in stored.journal {
                for line in row.lines.split(separator: UInt8(ascii: "\n")) {
                    if case .write(let write) = try ChangeRecord.parse(Array(line)).operation { tree.apply(write) }
                }
            }
            trees[app] = tree.root?.description ?? "null"
        }
        return (outbox, trees)
    }

    @Test("killed with SIGKILL at random points 25 times, the service ends with the outbox and trees of an uninterrupted run")
    func killedAndRestarted() async throws {
        let lines = Self.stream(seed: 42, count: 6_000)
        // The uninterrupted run.
        let reference = try await Self.prepare()
        try Self.append(lines[...], to: reference)
        let process = try Self.start(reference)
        #expect(try await Self.waitUntilConsumed(reference))
        process.terminate()
        process.waitUntilExit()
        let expected = try await Self.outcome(reference)
        #expect(expected.outbox.count > 1_000, "the stream should make many notifications")
        #expect(expected.outbox.contains { $0.contains(" revoke ") })

        // The same stream, fed in chunks, the service killed at random points.
        let crashed = try await Self.prepare()
        var random = SplitMix(seed: 7)
        var fed = 0
        var kills = 0
        while kills < 25 {
            // The last 100 lines are kept for the final run: its consuming them shows it is up
            // (signal handlers installed) before it is asked to stop.
            if fed < lines.count - 100 {
                let chunk = min(lines.count - 100 - fed, 150 + random.below(250))
                try Self.append(lines[fed..<(fed + chunk)], to: crashed)
                fed += chunk
            }
            let process = try Self.start(crashed)
            try await Task.sleep(for: .milliseconds(Int64(120 + random.below(600))))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            kills += 1

        }
        try Self.append(lines[fed...], to: crashed)
        let last = try Self.start(crashed)
        #expect(try await Self.waitUntilConsumed(crashed))
        last.terminate()
        last.waitUntilExit()
        #expect(last.terminationStatus == 0)
        let actual = try await Self.outcome(crashed)
        #expect(kills >= 20)
        #expect(actual.trees == expected.trees)
        #expect(actual.outbox.count == expected.outbox.count)
        if let first = zip(actual.outbox, expected.outbox).enumerated().first(where: { $0.element.0 != $0.element.1 }) {
            Issue.record("outbox row \(first.offset) differs:\n  crashed:  \(first.element.0.prefix(300))\n  expected: \(first.element.1.prefix(300))")
        }
    }
}
