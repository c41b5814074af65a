import Foundation
import PushCore
import PushFakes
import PushJSON
import PushTestSupport
import Testing

/// The operations API (SPEC §13) on the real executable against the fake providers: a
/// subscription found by uid shows its 503-then-delivered history, a record shows what it
/// caused and who got nothing and why, a paused webhook is listed and resumed, the live stream
/// tells attempts as they are settled, the rules playground answers, and every route refuses
/// without the token.
@Suite("The operations API end to end, as a process", .processLevel, .serialized)
struct OperationsEndToEndTests {
    static let token = "ops-token-0123456789abcdef"

    static func ops(_ port: Int, _ path: String, post body: String? = nil) throws -> (status: Int, json: JSON) {
        var arguments = ["-H", "Authorization: Bearer \(token)"]
        if let body { arguments += ["-X", "POST", "-H", "Content-Type: application/json", "--data", body] }
        let reply = try RunCommandTests.curl(arguments + ["http://127.0.0.1:\(port)\(path)"])
        return (reply.status, (try? JSONParser.parse(Array(reply.body.utf8))) ?? .null)
    }

    static func double(_ value: JSON?) -> Double? {
        switch value {
        case .double(let number)?: number
        case .int(let number)?: Double(number)
        default: nil
        }
    }

    @Test("history by subscription and by record, paused senders resumed, the live stream, the rules playground, the token")
    func operations() async throws {
        let fakes = try await FakeProviders.start(tls: true, webhooks: ["orders": ServiceEndToEndTests.webhookSecret])
        defer { Task { await fakes.stop() } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-ops-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        setenv("PD_TEST_OPERATIONS_TOKEN", Self.token, 1)
        try Data(
            """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson, deadLetter: ./dead.ndjson}
            http: {port: 0, operationsToken: env:PD_TEST_OPERATIONS_TOKEN}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 60s, retry: {initial: 200ms}}
            apps:
              toto:
                auth: {hs256Secret: "\(ServiceEndToEndTests.secret)"}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
                webhooks: {orders: {url: "\(fakes.webhookURL("orders"))", secret: "\(ServiceEndToEndTests.webhookSecret)"}}
                keys: "\(ServiceEndToEndTests.keyset.path)"
                signingKey: sig-es
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil))
        let device = "ops-fcm-device-token-0001"
        fakes.script(device, [.recorded("fcm-unavailable"), .normal])
        fakes.script("webhook:orders", [.status(401, body: "no"), .normal])

        // A line an earlier version refused by a defect since fixed: valid now, for redrive.
        let fixed = #"{"seq":90,"app":"toto","op":"put","path":"/a","data":{"redriven":true}}"#
        var earlier = JSONWriter()
        earlier.write([
            "ts": .int(Int64(Date().timeIntervalSince1970 * 1000) - 60_000), "source": "queue-file", "position": 0,
            "reason": "path: an earlier version refused it by a defect", "line": .string(fixed),
        ])
        try Data((String(decoding: earlier.bytes, as: UTF8.self) + "\n").utf8).write(to: folder.appendingPathComponent("dead.ndjson"))
        let service = try RunningService(config: config)
        defer { _ = service.stop() }
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }

        // Without the token: refused, as /status is.
        for path in ["/ops/v1/overview", "/ops/v1/senders", "/ops/v1/subscriptions?uid=alice", "/ops/v1/records/toto/1"] {
            let refused = try RunCommandTests.curl(["http://127.0.0.1:\(port)\(path)"])
            #expect(refused.status == 401 && refused.body.contains("\"error\":\"unauthorized\""), "\(path): \(refused.status)")
        }

        let mobile = try ServiceEndToEndTests.subscribe(port, #"{"kind":"mobile","mode":"value","format":"v2","path":"/a","context":"\#(device)"}"#)
        let doomed = try ServiceEndToEndTests.subscribe(port, #"{"kind":"mobile","mode":"value","format":"v2","path":"/b","context":"ops-fcm-device-token-0002"}"#)
        let hook = try ServiceEndToEndTests.subscribe(port, #"{"kind":"webhook","mode":"value","path":"/c","destination":"orders","context":"crm"}"#)
        try CrashTests.append(
            [
                #"{"seq":1,"app":"toto","op":"put","path":"/a","data":{"x":1}}"#,
                #"{"seq":2,"app":"toto","op":"revoke","path":"/b","reason":"permission_denied"}"#,
                #"{"seq":3,"app":"toto","op":"put","path":"/c","data":"hello","ts":\#(Int64(Date().timeIntervalSince1970 * 1000) - 5_000)}"#,
                #"{"seq":4,"app":"toto","op":"merge","path":"/a","data":{"note":"a value that is no one's business"}}"#,
            ], to: folder)

        // The FCM device: 503, then delivered after the retry.
        try await ServiceEndToEndTests.eventually("the retry delivered") { fakes.received(provider: "fcm").filter { $0.target == device && $0.status == 200 }.count == 1 }
        let found = try Self.ops(port, "/ops/v1/subscriptions?app=toto&uid=alice&path=/a")
        #expect(found.status == 200)
        let item = try #require(found.json["items"]?.arrayValue?.first)
        #expect(item["id"]?.stringValue == mobile && found.json["nextCursor"]?.isNull == true)
        #expect(item["token"]?["head"]?.stringValue == "ops-fc" && item["token"]?["tail"]?.stringValue == "0001")
        #expect(item["token"]?["sha256"]?.stringValue?.utf8.count == 12)
        #expect(!found.json.description.contains(device), "a device token is never shown whole")
        #expect(try Self.ops(port, "/ops/v1/subscriptions?token=\(device)").json["items"]?.arrayValue?.count == 1)
        try await ServiceEndToEndTests.eventually("the history of both attempts") {
            try Self.ops(port, "/ops/v1/subscriptions/toto/\(mobile)/history").json["items"]?.arrayValue?.count == 2
        }
        let history = try #require(try Self.ops(port, "/ops/v1/subscriptions/toto/\(mobile)/history").json["items"]?.arrayValue)
        #expect(history.map { $0["outcome"]?.stringValue } == ["delivered", "retry"])
        #expect(history.map { $0["status"]?.integerValue } == [200, 503])
        #expect(history.map { $0["seq"]?.integerValue } == [1, 1] && history.map { $0["attempt"]?.integerValue } == [2, 1])
        #expect(history[1]["reason"]?.stringValue?.hasPrefix("UNAVAILABLE") == true && history[1]["nextAt"]?.integerValue != nil)

        // Record 1 caused one notification; record 2 revoked /b: its revoke notification, and `denied`.
        let one = try Self.ops(port, "/ops/v1/records/toto/1").json
        #expect(one["notifications"]?.arrayValue?.map { $0["subscription"]?.stringValue } == [mobile])
        #expect(one["nothing"]?.arrayValue?.isEmpty == true)
        try await ServiceEndToEndTests.eventually("the revoke notice sent") { fakes.received(provider: "fcm").filter { $0.target == "ops-fcm-device-token-0002" }.count == 1 }
        let two = try Self.ops(port, "/ops/v1/records/toto/2").json
        #expect(two["nothing"]?.arrayValue?.map { "\($0["subscription"]?.stringValue ?? ""):\($0["why"]?.stringValue ?? "")" } == ["\(doomed):denied"])
        #expect(two["notifications"]?.arrayValue?.first?["subscription"]?.stringValue == doomed)
        #expect(try Self.ops(port, "/ops/v1/records/toto/x").status == 400)

        // The refused line: listed with why, shown by its start, length and digest only.
        try await ServiceEndToEndTests.eventually("the dead letter") { try Self.ops(port, "/ops/v1/deadletter").json["items"]?.arrayValue?.count == 2 }
        let letters = try Self.ops(port, "/ops/v1/deadletter?app=toto&reason=op")
        let letter = try #require(letters.json["items"]?.arrayValue?.first)
        #expect(letter["seq"]?.integerValue == 4 && letter["source"]?.stringValue == "queue-file" && letter["reason"]?.stringValue?.contains("op") == true, "\(letter)")
        #expect(letter["line"]?["bytes"]?.integerValue == 99 && letter["line"]?["sha256"]?.stringValue?.utf8.count == 12, "\(letter)")
        #expect(!letters.json.description.contains("no one's business"), "a refused line's data is never shown whole")
        #expect(try Self.ops(port, "/ops/v1/deadletter?reason=too_long").json["items"]?.arrayValue?.isEmpty == true)
        #expect(try Self.ops(port, "/ops/v1/deadletter?since=\(Int64(Date().timeIntervalSince1970 * 1000) + 60_000)").json["items"]?.arrayValue?.isEmpty == true)

        // The same from the command line.
        let cli = try RunCommandTests.statusConfiguration(config, port: port, in: folder)
        let attempts = try Executable.run(["history", "--config", cli, "--app", "toto", "--subscription", mobile])
        #expect(attempts.status == 0 && attempts.lines.count == 3, "\(attempts.stdout)\(attempts.stderr)")
        #expect(attempts.lines.dropFirst().map { $0.split(separator: "\t")[7] } == ["delivered", "retry"], "\(attempts.stdout)")
        let fate = try Executable.run(["history", "--config", cli, "--record", "toto:2"])
        #expect(fate.status == 0 && fate.stdout.contains("nothing for subscription \(doomed): denied"), "\(fate.stdout)\(fate.stderr)")
        let search = try Executable.run(["history", "--config", cli, "--app", "toto", "--uid", "alice", "--path", "/a"])
        #expect(search.status == 0 && search.stdout.contains("ops-fc…0001 sha256:") && !search.stdout.contains(device), "\(search.stdout)")
        let listedLetters = try Executable.run(["deadletter", "list", "--config", cli])
        #expect(listedLetters.status == 0 && listedLetters.lines.count == 3 && listedLetters.lines[2].contains("\tqueue-file\t"), "\(listedLetters.stdout)")
        // Redrive: the line valid now is applied once (delivered to the device), the other stays.
        let dry = try Self.ops(port, "/ops/v1/deadletter/redrive", post: #"{"dryRun":true}"#).json
        #expect(dry["applied"]?.integerValue == 1 && dry["refused"]?.integerValue == 1, "\(dry)")
        let redriven = try Executable.run(["deadletter", "redrive", "--config", cli])
        #expect(redriven.status == 0 && redriven.stdout.hasPrefix("applied 1, still refused 1, redriven before 0"), "\(redriven.stdout)\(redriven.stderr)")
        // (The device's payloads are v2, sealed: its delivery is read from the record's fate.)
        try await ServiceEndToEndTests.eventually("the redriven record delivered") {
            let fate = try Self.ops(port, "/ops/v1/records/toto/90").json
            return fate["notifications"]?.arrayValue?.first?["attempts"]?.arrayValue?.first?["outcome"]?.stringValue == "delivered"
                && fate["notifications"]?.arrayValue?.first?["subscription"]?.stringValue == mobile
        }
        let again = try Self.ops(port, "/ops/v1/deadletter/redrive", post: "{}").json
        #expect(again["applied"]?.integerValue == 0 && again["alreadyRedriven"]?.integerValue == 1 && again["refused"]?.integerValue == 1, "\(again)")
        let bad = try Executable.run(["history", "--config", cli, "--record", "toto"])
        #expect(bad.status != 0 && bad.stderr.contains("--record: expected APP:SEQ"), "\(bad.stderr)")

        // The webhook refused our signature: its destination is paused, listed, resumed at once.
        try await ServiceEndToEndTests.eventually("the webhook paused") { try Self.ops(port, "/ops/v1/senders").json["items"]?.arrayValue?.count == 1 }
        let paused = try #require(try Self.ops(port, "/ops/v1/senders").json["items"]?.arrayValue?.first)
        #expect(paused["app"]?.stringValue == "toto" && paused["provider"]?.stringValue == "webhook" && paused["destination"]?.stringValue == "orders")
        #expect(paused["reason"]?.stringValue?.contains("401") == true)
        #expect(try Self.ops(port, "/ops/v1/senders/resume", post: #"{"app":"toto","provider":"fcm"}"#).status == 404)
        let listed = try Executable.run(["senders", "list", "--config", cli])
        #expect(listed.status == 0 && listed.lines.last?.hasPrefix("toto\twebhook\torders\t") == true, "\(listed.stdout)")
        let notPaused = try Executable.run(["senders", "resume", "--config", cli, "--app", "toto", "--provider", "fcm"])
        #expect(notPaused.status == 1 && notPaused.stderr.contains("answered 404: no paused sender for toto/fcm"), "\(notPaused.stderr)")
        #expect(try Self.ops(port, "/ops/v1/senders/resume", post: #"{"app":"toto","provider":"webhook"}"#).status == 400)
        // The live stream, opened before the resume: it tells the delivery.
        async let stream = onThread {
            try RunCommandTests.curl(["-N", "--max-time", "6", "-H", "Authorization: Bearer \(Self.token)", "http://127.0.0.1:\(port)/ops/v1/events?app=toto&provider=webhook"])
        }
        try await Task.sleep(for: .seconds(1))
        let resumed = try Self.ops(port, "/ops/v1/senders/resume", post: #"{"app":"toto","provider":"webhook","destination":"orders"}"#)
        #expect(resumed.status == 200 && resumed.json["resumed"]?.boolValue == true)
        try await ServiceEndToEndTests.eventually("the webhook delivered") { fakes.received(provider: "webhook").filter { $0.status == 200 }.count == 1 }
        let events = try await stream
        #expect(events.status == 200 && events.headers["content-type"] == "text/event-stream")
        let data = events.body.split(separator: "\n").filter { $0.hasPrefix("data: ") }.map { try? JSONParser.parse(Array($0.dropFirst(6).utf8)) }
        #expect(data.contains { $0?["subscription"]?.stringValue == hook && $0?["outcome"]?.stringValue == "delivered" }, "\(events.body)")
        #expect(try Self.ops(port, "/ops/v1/senders").json["items"]?.arrayValue?.isEmpty == true)

        // The rules playground: the default rules let an authenticated user read.
        let allowed = try Self.ops(port, "/ops/v1/rules/simulate", post: #"{"app":"toto","path":"/a","auth":{"uid":"alice"}}"#)
        #expect(allowed.status == 200 && allowed.json["allowed"]?.boolValue == true, "\(allowed.json)")
        let denied = try Self.ops(port, "/ops/v1/rules/simulate", post: #"{"app":"toto","path":"/a","auth":null}"#)
        #expect(denied.status == 200 && denied.json["allowed"]?.boolValue == false)
        #expect(try Self.ops(port, "/ops/v1/rules/simulate", post: #"{"app":"nope","path":"/a"}"#).status == 400)
        #expect(try Self.ops(port, "/ops/v1/recover", post: #"{"app":"toto","since":0}"#).json["recovered"]?.integerValue == 0)
        let recovered = try Executable.run(["recover", "--config", cli, "--app", "toto", "--since", "2026-01-01T00:00:00Z"])
        #expect(recovered.status == 0 && recovered.stdout == "recovered 0 notification(s)\n", "\(recovered.stdout)\(recovered.stderr)")
        #expect(try Executable.run(["senders", "list", "--config", cli]).stdout == "no sender is paused\n")
        #expect(try Self.ops(port, "/ops/v1/recover", post: #"{"app":"toto"}"#).status == 400)
        let overview = try Self.ops(port, "/ops/v1/overview")
        #expect(overview.status == 200)
        let fcm = overview.json["senders"]?.arrayValue?.first { $0["provider"]?.stringValue == "fcm" }
        #expect(fcm?["app"]?.stringValue == "toto" && (Self.double(fcm?["perSecond1m"]) ?? 0) > 0, "\(overview.json)")
        #expect(Self.double(fcm?["successRatio"]).map { $0 > 0 && $0 < 1 } == true && fcm?["p50Ms"]?.integerValue != nil, "503 then delivered: \(overview.json)")
        #expect((overview.json["lagMs"]?["toto"]?.integerValue ?? 0) >= 5_000, "\(overview.json)")
        #expect(overview.json["history"]?["on"]?.boolValue == true && overview.json["sending"]?["perAppLimit"]?.integerValue != nil)
        // The FCM credentials: whose, held until when; nothing secret.
        let credentials = try #require(overview.json["credentials"]?.arrayValue?.first { $0["provider"]?.stringValue == "fcm" }, "\(overview.json)")
        #expect(credentials["app"]?.stringValue == "toto" && credentials["mechanism"]?.stringValue == "oauth" && credentials["state"]?.stringValue == "ok")
        #expect(credentials["identity"]?.stringValue?.contains("@") == true && (credentials["expiresAt"]?.integerValue ?? 0) > (overview.json["now"]?.integerValue ?? .max))
        var writer = JSONWriter()
        writer.write(overview.json)
        let text = String(decoding: writer.bytes, as: UTF8.self)
        #expect(!text.contains("PRIVATE KEY") && !text.contains("ya29."), "\(text)")
        // A stream still open does not hold the stop: it ends, and the service exits cleanly.
        async let open = onThread {
            try RunCommandTests.curl(["-N", "--max-time", "30", "-H", "Authorization: Bearer \(Self.token)", "http://127.0.0.1:\(port)/ops/v1/events"])
        }
        try await Task.sleep(for: .seconds(1))
        let stopping = Date()
        #expect(service.stop() == 0)
        #expect(Date().timeIntervalSince(stopping) < 10)
        #expect(try await open.status == 200)
    }

    @Test("notifications recovered through the API are claimed at once, even when the service is idle")
    func recoveredAtOnce() async throws {
        let fakes = try await FakeProviders.start(tls: true)
        defer { Task { await fakes.stop() } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-recover-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        setenv("PD_TEST_OPERATIONS_TOKEN", Self.token, 1)
        try Data(
            """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson, deadLetter: ./dead.ndjson}
            http: {port: 0, operationsToken: env:PD_TEST_OPERATIONS_TOKEN}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 60s, retry: {initial: 200ms, window: 1s}}
            apps:
              toto:
                auth: {hs256Secret: "\(ServiceEndToEndTests.secret)"}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil))
        let device = "recover-fcm-device-token-0001"
        fakes.setStanding(device, .recorded("fcm-unavailable"))
        let service = try RunningService(config: config)
        defer { _ = service.stop() }
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
        let id = try ServiceEndToEndTests.subscribe(port, #"{"kind":"mobile","mode":"value","format":"v2","path":"/a","context":"\#(device)"}"#)
        try CrashTests.append([#"{"seq":1,"app":"toto","op":"put","path":"/a","data":{"x":1}}"#], to: folder)
        try await ServiceEndToEndTests.eventually("discarded after the 1 s window") {
            try Self.ops(port, "/ops/v1/subscriptions/toto/\(id)/history").json["items"]?.arrayValue?.first?["outcome"]?.stringValue == "discarded"
        }
        fakes.setStanding(device, nil)
        // Nothing else is due: only the recovery's wake-up sends it (before, it waited for the next record).
        #expect(try Self.ops(port, "/ops/v1/recover", post: #"{"app":"toto","since":0}"#).json["recovered"]?.integerValue == 1)
        try await ServiceEndToEndTests.eventually("the recovered notification delivered", timeout: 10) {
            fakes.received(provider: "fcm").contains { $0.target == device && $0.status == 200 }
        }
        #expect(service.stop() == 0)
    }
}
