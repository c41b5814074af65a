import Foundation
import PushCore
import PushJSON
import PushJOSE
import PushStore
import PushFakes
import PushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `pushdispatch run` delivering to the fake providers is killed with SIGKILL in the middle
/// of a burst of sends; after a restart everything is delivered, and the only duplicates are
/// sends that were in flight when it died.
@Suite("Delivery across a crash", .processLevel, .serialized)
struct DeliveryCrashTests {
    static let subscriptions = 300

    @Test("SIGKILL during a burst of sends: after the restart every notification is delivered, duplicates only for sends in flight")
    func killDuringBurst() async throws {
        let fakes = try await FakeProviders.start()
        defer { Task { await fakes.stop() } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-delivery-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
        let config = """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson, deadLetter: ./dead.ndjson}
            http: {port: 0}
            delivery: {concurrency: {perProvider: 16, perApp: 16}, timeout: 30s}
            apps:
              toto:
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
            """
        try Data(config.utf8).write(to: folder.appendingPathComponent("pushdispatch.yaml"))
        let store = try SQLiteStore(path: folder.appendingPathComponent("store.db").path)
        for index in 0..<Self.subscriptions {
            // Slow answers keep sends in flight for the kill to land among them.
            fakes.script("t\(index)", [.slow(.milliseconds(20), then: .normal)])
            let tuple = SubscriptionTuple(app: "toto", uid: "u\(index)", kind: .fcm, destination: nil, path: try Path("/users/u\(index)"), context: "t\(index)")
            _ = try await store.save(
                Subscription(id: SubscriptionID.derive(tuple), tuple: tuple, mode: .value, format: .v1, encryption: nil, createdAt: 1, expiresAt: 4_000_000_000),
                allowUpdate: false)
        }
        let lines = (0..<Self.subscriptions).map { #"{"seq":\#($0 + 1),"app":"toto","op":"put","path":"/users/u\#($0)","data":{"n":\#($0)}}"# }
        try CrashTests.append(lines[...], to: folder)

        var process = try CrashTests.start(folder)
        let deadline = Date().addingTimeInterval(60)
        while fakes.received(provider: "fcm").count < Self.subscriptions / 3 {
            guard Date() < deadline, process.isRunning else { throw CrashError("the service sent \(fakes.received(provider: "fcm").count) messages") }
            try await Task.sleep(for: .milliseconds(2))
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try await Task.sleep(for: .milliseconds(200))  // the dead process's last requests, still in the fake's socket buffers
        // What the killed process sent (delivered, or in flight when it died) carries its own
        // access token: the restarted process fetches another.
        let firstToken = fakes.received(provider: "fcm").first?.headers["authorization"]
        // What the dead process had not recorded as done: still in the outbox.
        let unsettled = Set(try await store.notifications(limit: 10_000).compactMap(\.entry.target))
        #expect(Set(fakes.received(provider: "fcm").map(\.target)).count < Self.subscriptions, "the kill came after the burst")

        process = try CrashTests.start(folder)
        let restartDeadline = Date().addingTimeInterval(60)
        while true {
            let pending = try await store.outboxDepth().count
            if pending == 0 && Set(fakes.received(provider: "fcm").map(\.target)).count == Self.subscriptions { break }
            guard Date() < restartDeadline, process.isRunning else { throw CrashError("\(pending) notifications still wait after the restart") }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)

        // Requests of the killed process still in the fake's buffers were answered late: they
        // are told apart by the access token, whenever they were answered.
        let sentBefore = Set(fakes.received(provider: "fcm").filter { $0.headers["authorization"] == firstToken }.map(\.target))
        let all = fakes.received(provider: "fcm").filter { $0.status == 200 }
        var counts: [String: Int] = [:]
        for message in all { counts[message.target, default: 0] += 1 }
        // Every subscription got its notification, with the right content.
        #expect(counts.count == Self.subscriptions)
        for message in all {
            let data = try JSONParser.parse(message.data)
            let index = Int(message.target.dropFirst())!
            #expect(data["d"]?.stringValue == #"{"n":\#(index)}"#)
        }
        // Duplicates: only sends the killed process made (in flight, or answered but not yet
        // recorded as done when it died).
        let duplicated = counts.filter { $0.value > 1 }.map(\.key)
        #expect(duplicated.allSatisfy { unsettled.contains($0) })
        #expect(
            duplicated.allSatisfy { sentBefore.contains($0) },
            "\(duplicated.filter { !sentBefore.contains($0) }.prefix(3).map { target in fakes.received(provider: "fcm").filter { $0.target == target }.map { "\(target) \($0.arrivedAt)-\($0.at) \($0.status)" } })")
        #expect(counts.values.allSatisfy { $0 <= 2 })
    }
}

struct CrashError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
