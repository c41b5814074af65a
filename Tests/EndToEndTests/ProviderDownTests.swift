import Foundation
import PushCore
import PushFakes
import PushTestSupport
import Testing

/// A provider down for longer than the retry window (issue 22, the machine's faults): the
/// service discards what is past the window and counts it, keeps the subscriptions, keeps
/// its outbox and its memory bounded, and delivers again once the provider is back.
@Suite("A provider down for longer than the window, as a process", .processLevel, .serialized)
struct ProviderDownTests {
    /// `name value` lines of the Prometheus text, for the samples without labels or with these.
    static func metric(_ text: String, _ name: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") || line.hasPrefix(name + "{") {
            if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { return value }
        }
        return nil
    }

    /// The resident memory of a process, in MiB.
    static func residentMiB(_ pid: Int32) -> Double? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return line.split(separator: " ").dropFirst().first.flatMap { Double($0) }.map { $0 / 1024 }
        }
        return nil
    }

    @Test("FCM answering 503 past a 3 s window: discarded and counted, the subscription kept, the outbox and memory flat; then delivered again")
    func providerDown() async throws {
        let fakes = try await FakeProviders.start(tls: false, webhooks: [:])
        defer { Task { await fakes.stop() } }
        // Down: every send to this device answered 503 UNAVAILABLE, for the whole test.
        fakes.script("down-device", Array(repeating: .recorded("fcm-unavailable"), count: 100_000))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-down-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {sqlite: ./store.db}
            ingest: {socket: ./in.sock, deadLetter: ./dead.ndjson}
            http: {port: 0}
            delivery: {retry: {initial: 100ms, window: 3s}, timeout: 30s}
            apps:
              toto:
                auth: {hs256Secret: "\(ServiceEndToEndTests.secret)"}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        let service = try RunningService(config: config)
        defer { _ = service.stop() }
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
        // childEvent: notifications never merge, each record one more.
        let id = try ServiceEndToEndTests.subscribe(port, #"{"kind":"mobile","mode":"childEvent","format":"v2","path":"/a","context":"down-device"}"#)
        let socket = try SocketClient(path: folder.appendingPathComponent("in.sock").path)

        // 20 rounds of 40 writes, each acknowledged, a second apart; a sample of the outbox,
        // the counts and the memory after each.
        var seq: Int64 = 0
        var samples: [(depth: Double, discarded: Double, rss: Double)] = []
        // Rounds, not seconds: on a loaded machine a round takes longer, and each still samples.
        for _ in 0..<20 {
            let lines = (1...40).map { _ -> String in
                seq += 1
                return #"{"seq":\#(seq),"app":"toto","op":"patch","path":"/a","data":{"k\#(seq)":"\#(String(repeating: "v", count: 200))"}}"#
            }
            socket.send(lines.joined(separator: "\n") + "\n")
            let answers = try await onThread { socket.answers(40, timeout: 20) }
            #expect(answers.count == 40 && answers.allSatisfy { $0.contains(#""ok":true"#) }, "\(answers.prefix(2))")
            let metrics = try RunCommandTests.curl(["http://127.0.0.1:\(port)/metrics"]).body
            samples.append(
                (
                    Self.metric(metrics, "pushdispatch_outbox_depth") ?? -1,
                    Self.metric(metrics, "pushdispatch_deliveries_total{provider=\"fcm\",outcome=\"discarded\"}") ?? 0,
                    Self.residentMiB(service.process.processIdentifier) ?? -1
                ))
            try await Task.sleep(for: .milliseconds(1000))
        }
        let summary = samples.map { "depth \(Int($0.depth)) discarded \(Int($0.discarded)) rss \(Int($0.rss)) MiB" }
        print("provider down, each second: \(summary.joined(separator: "; "))")
        // Discarded past the window, and counted: every record written is delivered (none
        // here), waiting, or counted as discarded.
        #expect(samples.last!.discarded >= 1, "\(summary)")
        let written = Double(seq)
        try await ServiceEndToEndTests.eventually("every notification waiting or counted as discarded", timeout: 30) {
            let metrics = try RunCommandTests.curl(["http://127.0.0.1:\(port)/metrics"]).body
            let depth = Self.metric(metrics, "pushdispatch_outbox_depth") ?? -1
            let discarded = Self.metric(metrics, "pushdispatch_deliveries_total{provider=\"fcm\",outcome=\"discarded\"}") ?? 0
            return depth + discarded == written
        }
        // The outbox holds about a window of writes (3 s × 40/s, plus a back-off's lag), never
        // the 800 written.
        let depths = samples.dropFirst(5).map(\.depth)
        #expect(depths.allSatisfy { $0 >= 0 && $0 <= 400 }, "\(summary)")
        // Memory flat once warm: the last samples within 30 MiB of the one after warm-up.
        try #require(samples.count == 20)
        let warm = samples[5].rss
        #expect(samples.suffix(5).allSatisfy { $0.rss > 0 && $0.rss <= warm + 30 }, "\(summary)")
        // The subscription stays.
        let listed = try RunCommandTests.curl([
            "-H", "Authorization: Bearer \(try ServiceEndToEndTests.token("alice"))", "http://127.0.0.1:\(port)/datasync/v2/toto/subscriptions/alice",
        ])
        #expect(listed.status == 200 && listed.body.contains(id), "\(listed.body)")

        // The provider is back: the next write is delivered.
        fakes.script("down-device", [])
        let before = fakes.received(provider: "fcm").filter { $0.status == 200 }.count
        seq += 1
        socket.send(#"{"seq":\#(seq),"app":"toto","op":"patch","path":"/a","data":{"back":true}}"# + "\n")
        #expect(try await onThread { socket.answers(1, timeout: 20) }.first?.contains(#""ok":true"#) == true)
        try await ServiceEndToEndTests.eventually("a delivery once FCM is back", timeout: 60) {
            fakes.received(provider: "fcm").filter { $0.status == 200 }.count > before
        }
    }
}
