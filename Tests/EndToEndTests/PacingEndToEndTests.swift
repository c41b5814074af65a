import Foundation
import PushCore
import PushFakes
import PushJSON
import PushTestSupport
import Testing

/// Two `pushdispatch` processes on one PostgreSQL database share one FCM budget (issue 34):
/// each paces at half of it, so together they send at the budget, which here is the fake FCM's
/// quota.
@Suite("Pacing shared by two instances on PostgreSQL, as processes", .processLevel, .serialized, .enabled(if: PostgresTestServer.enabled))
struct PacingEndToEndTests {
    static let quota = 20
    static let phones = 20 * quota

    static func config(_ folder: URL, instance: String, database: String, fakes: FakeProviders) -> String {
        """
        store: {postgres: "\(database)"}
        instance: {name: \(instance)}
        ingest: {queueFile: ./changes.ndjson, socket: ./pushdispatch.sock, deadLetter: ./dead.ndjson}
        http: {port: 0}
        delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 60s, pacing: {fcm: \(quota)/s}}
        apps:
          app1:
            auth: {hs256Secret: "\(MultiInstanceTests.secret("app1"))"}
            fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
            subscriptions: {maxPerUser: 1000}
          app2:
            auth: {hs256Secret: "\(MultiInstanceTests.secret("app2"))"}
        """
    }

    @Test("a burst of 20 × the budget through two instances sharing it goes at the budget: FCM, whose quota it is, refuses under 1 % after the first second; both instances send")
    func sharedBudget() async throws {
        let server = try PostgresTestServer.shared.get()
        let database = try server.createDatabase()
        let fakes = try await FakeProviders.start(tls: true)
        defer { Task { await fakes.stop() } }
        fakes.setQuota(fcm: Self.quota)
        var folders: [URL] = []
        var services: [RunningService] = []
        for index in 1...2 {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-pacing-\(UUID().uuidString.prefix(8))-\(index)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
            try Data(Self.config(folder, instance: "node-\(index)", database: database, fakes: fakes).utf8).write(to: folder.appendingPathComponent("pushdispatch.yaml"))
            #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil))
            folders.append(folder)
            services.append(try RunningService(config: folder.appendingPathComponent("pushdispatch.yaml").path))
        }
        defer { for service in services where service.process.isRunning { _ = service.stop() } }
        var ports: [Int] = []
        for service in services { ports.append(try await service.port()) }
        // Both see each other: one application each.
        try await ServiceEndToEndTests.eventually("one application per instance", timeout: 30) {
            Set(try MultiInstanceTests.owners(server, database).values).count == 2
        }
        let token = try MultiInstanceTests.token("app1")
        for index in 0..<Self.phones {
            let reply = try RunCommandTests.curl([
                "-X", "POST", "http://127.0.0.1:\(ports[index % 2])/datasync/v2/app1/subscriptions/alice",
                "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: application/json",
                "--data", #"{"kind":"mobile","mode":"noData","path":"/feed","context":"phone-\#(index)"}"#,
            ])
            #expect(reply.status == 201, "\(reply.body)")
        }
        // A second for the lease rounds to count both instances again (their shares).
        try await Task.sleep(for: .seconds(2))
        try CrashTests.append([#"{"seq":1,"app":"app1","op":"put","path":"/feed","data":{"post":"hello"}}"#], to: folders[0])
        try await ServiceEndToEndTests.eventually("every phone delivered", timeout: 90) {
            fakes.received(provider: "fcm").filter { $0.status == 200 }.count >= Self.phones
        }
        let sends = fakes.received(provider: "fcm")
        let first = sends.map(\.at).min() ?? 0
        let last = sends.filter { $0.status == 200 }.map(\.at).max() ?? first
        let later = sends.filter { $0.at - first >= 1_000 }
        let refusedLater = later.filter { $0.status == 429 }.count
        let seconds = Double(last - first) / 1_000
        // 400 at 20 a second: 20 s; each instance alone at the whole budget would take 10 s
        // and be refused half the time.
        #expect(seconds >= 17 && seconds <= 26, "delivered in \(seconds) s")
        #expect(Double(refusedLater) < 0.01 * Double(later.count), "\(refusedLater) of \(later.count) refused after the first second")
        print("pacing shared by two instances: \(Self.phones) at a budget and quota of \(Self.quota)/s delivered in \(seconds) s; \(refusedLater) of \(later.count) requests refused after the first second, \(sends.filter { $0.status == 429 }.count) in all")
        // Both sent their part.
        for port in ports {
            let metrics = try RunCommandTests.curl(["http://127.0.0.1:\(port)/metrics"]).body
            let line = metrics.split(separator: "\n").first {
                $0.hasPrefix("pushdispatch_deliveries_total{") && $0.contains(#"provider="fcm""#) && $0.contains(#"outcome="delivered""#)
            }
            let count = line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
            #expect(count >= 50, "instance on port \(port) delivered \(count)")
        }
    }
}
