import Foundation
import PushCore
import PushFakes
import PushJSON
import PushTestSupport
import Testing

/// Push Kit v3 for HarmonyOS (issue 34) through `pushdispatch run` as a user runs it: the
/// subscription kind `harmonyos` over REST, records through the socket, what the fake Push Kit
/// received, every answer class as the process meets it, and a JWT refused as expired.
@Suite("Push Kit v3 (HarmonyOS) end to end, as a process", .processLevel, .serialized)
struct HarmonyEndToEndTests {
    struct Row {
        var app: String
        /// The first answer, scripted (`nil`: the fake's own).
        var fixture: String?
        var target: String
        /// `delivered`, `retried`, `revoked`, `failed`, `paused`.
        var expected: String
        var id = ""
    }

    static let rows: [Row] = [
        Row(app: "toto", fixture: nil, target: "MAAALgE4-phone", expected: "delivered"),
        Row(app: "toto", fixture: "harmony-internal", target: "row-internal", expected: "retried"),
        Row(app: "toto", fixture: "harmony-jwt-expired", target: "row-jwt-expired", expected: "retried"),
        Row(app: "toto", fixture: "harmony-auth-error", target: "row-auth-error", expected: "retried"),
        Row(app: "toto", fixture: nil, target: "unregistered-row", expected: "revoked"),
        Row(app: "toto", fixture: "harmony-all-tokens-invalid", target: "unregistered-token", expected: "revoked"),
        Row(app: "toto", fixture: "harmony-too-large", target: "row-too-large", expected: "failed"),
        Row(app: "toto", fixture: "harmony-payload-error", target: "row-payload", expected: "failed"),
        Row(app: "p1", fixture: "harmony-not-allowed", target: "row-not-allowed", expected: "paused"),
        Row(app: "p2", fixture: "harmony-penalised", target: "row-penalised", expected: "paused"),
        Row(app: "p3", fixture: "harmony-no-push-type-right", target: "t1", expected: "paused"),
    ]

    @Test("subscriptions of kind harmonyos get the data map as extraData with push-type 6 and a PS256 JWT; each answer in its class; an expired JWT is signed again")
    func endToEnd() async throws {
        let fakes = try await FakeProviders.start(tls: true)
        defer { Task { await fakes.stop() } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-harmony-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.harmonyAccountJSON).write(to: folder.appendingPathComponent("agc-service-account.json"))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: folder.appendingPathComponent("agc-service-account.json").path)
        var text = """
            store: {sqlite: ./store.db}
            ingest: {socket: ./in.sock, deadLetter: ./dead.ndjson}
            http: {port: 0}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 30s, retry: {initial: 200ms, window: 2h}}
            apps:

            """
        for app in ["toto", "p1", "p2", "p3", "nokit"] {
            text += """
                  \(app):
                    auth: {hs256Secret: "\(DirectProvidersEndToEndTests.secret(app))"}

                """
            if app != "nokit" {
                text += """
                        harmonyos: {serviceAccountFile: ./agc-service-account.json, endpoint: "\(fakes.harmonyEndpoint)"}

                    """
            }
        }
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: config))
        let service = try RunningService(config: config)
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }

        // An application without harmonyos refuses the kind; a missing token is named.
        let refused = try DirectProvidersEndToEndTests.post(port, app: "nokit", #"{"kind":"harmonyos","mode":"value","path":"/a","context":"t"}"#)
        #expect(refused.status == 400 && refused.body.contains("no apps.nokit.harmonyos"), "\(refused)")
        let missing = try DirectProvidersEndToEndTests.post(port, app: "toto", #"{"kind":"harmonyos","mode":"value","path":"/a"}"#)
        #expect(missing.status == 400 && missing.body.contains("the device's HarmonyOS push token"), "\(missing)")

        var rows = Self.rows
        for index in rows.indices {
            if let fixture = rows[index].fixture {
                let answer = ProviderFixtures.answer(fixture)
                fakes.script(rows[index].target, [.status(answer.status, body: String(decoding: answer.body, as: UTF8.self), retryAfter: nil), .normal])
            }
            rows[index].id = try DirectProvidersEndToEndTests.subscribe(
                port, app: rows[index].app, #"{"kind":"harmonyos","mode":"value","format":"v1","path":"/rows/\#(index)","context":"\#(rows[index].target)"}"#)
        }
        let socket = try SocketClient(path: folder.appendingPathComponent("in.sock").path)
        var lines: [String] = []
        for app in ["toto", "p1", "p2", "p3"] {
            let members = rows.indices.filter { rows[$0].app == app }.map { "\"\($0)\":{\"v\":\($0)}" }.joined(separator: ",")
            lines.append(#"{"seq":\#(lines.count + 1),"app":"\#(app)","op":"put","path":"/rows","data":{\#(members)}}"#)
        }
        socket.send(lines.joined(separator: "\n") + "\n")
        let expected = lines.count
        let answers = try await onThread { socket.answers(expected, timeout: 30) }
        #expect(answers.count == lines.count && answers.allSatisfy { $0.contains(#""ok":true"#) }, "\(answers)")

        func sends(_ row: Row) -> [FakeProviders.Received] { fakes.received(provider: "harmonyos").filter { $0.target == row.target } }
        func settled(_ row: Row) throws -> Bool {
            let got = sends(row)
            switch row.expected {
            case "delivered": return got.contains { $0.status == 200 }
            case "retried": return got.count >= 2 && got.last?.status == 200
            case "revoked": return try !DirectProvidersEndToEndTests.exists(port, app: row.app, row.id)
            default: return got.count >= 1
            }
        }
        let end = Date().addingTimeInterval(90)
        while try rows.contains(where: { try !settled($0) }) && Date() < end { try await Task.sleep(for: .milliseconds(100)) }
        try await Task.sleep(for: .seconds(1))  // what could still (wrongly) go out, would
        for row in rows {
            let got = sends(row)
            let kept = try DirectProvidersEndToEndTests.exists(port, app: row.app, row.id)
            switch row.expected {
            case "delivered": #expect(got.map(\.status) == [200] && kept, "\(row.target)")
            case "retried": #expect(got.count == 2 && got.last?.status == 200 && kept, "\(row.target): \(got.map(\.status))")
            case "revoked": #expect(got.count == 1 && !kept, "\(row.target): \(got.map(\.status)), kept \(kept)")
            default: #expect(got.count == 1 && kept, "\(row.expected) \(row.target): \(got.map(\.status)), kept \(kept)")
            }
        }
        // What a device gets: the data map as extraData, a background message, the JWT.
        let delivered = try #require(sends(rows[0]).first)
        #expect(String(decoding: delivered.data, as: UTF8.self) == #"{"s":"OK","t":"value","app":"toto","sp":"/rows/0","d":"{\"v\":0}"}"#)
        #expect(delivered.headers["push-type"] == "6" && delivered.headers["authorization"]?.hasPrefix("Bearer ey") == true)
        let deliveries = try ServiceEndToEndTests.parsedDeliveries(port)
        #expect(deliveries["harmonyos/revoked"] == 2 && deliveries["harmonyos/failed"] == 2, "\(deliveries)")
        let status = try JSONParser.parse(Array(try RunCommandTests.curl(["http://127.0.0.1:\(port)/status"]).body.utf8))
        let paused = (status["paused"]?.arrayValue ?? []).filter { $0["kind"]?.stringValue == "harmonyos" }.compactMap { $0["app"]?.stringValue }.sorted()
        #expect(paused == ["p1", "p2", "p3"], "\(status)")

        // Every JWT seen is now expired: the next send is refused once, signed again, delivered.
        let before = Set(fakes.received(provider: "harmonyos").compactMap { $0.headers["authorization"] })
        let refusedBefore = fakes.received(provider: "harmonyos").filter { $0.status == 401 }.count
        fakes.expireHarmonyJWTs()
        socket.send(#"{"seq":5,"app":"toto","op":"put","path":"/rows/0","data":{"v":"again"}}"# + "\n")
        _ = try await onThread { socket.answers(1, timeout: 30) }
        try await ServiceEndToEndTests.eventually("delivered with a new JWT") { sends(rows[0]).filter { $0.status == 200 }.count == 2 }
        let last = try #require(sends(rows[0]).last)
        #expect(!before.contains(last.headers["authorization"] ?? ""))
        #expect(sends(rows[0]).map(\.status) == [200, 200])
        // The expired JWT refused once (before the fake read whom the request was for).
        let refused401 = fakes.received(provider: "harmonyos").filter { $0.status == 401 }
        #expect(refused401.count == refusedBefore + 1 && before.contains(refused401.last?.headers["authorization"] ?? ""))
        #expect(await service.stop(within: 60) == 0)
    }
}
