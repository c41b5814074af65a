import Foundation
import PushCore
import PushJSON
import PushJOSE
import PushFakes
import PushTestSupport
import Testing

/// Read rules (SPEC §12) with the real executable and the fake FCM: who may subscribe to what,
/// a revocation with `permission_denied` when access ends, `rules check` and `replay`.
@Suite("Read rules, as a process", .processLevel, .serialized)
struct ReadRulesEndToEndTests {
    static let secret = ServiceEndToEndTests.secret
    static let rules =
        #"{"rules": {"users": {"$uid": {".read": "auth.uid == $uid"}}, "rooms": {"$room": {".read": "root.child('members').child($room).hasChild(auth.uid)"}}}}"#

    static func token(_ subject: String) throws -> String {
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        let claims: JSON = ["sub": .string(subject), "exp": .int(Int64(Date().timeIntervalSince1970) + 600)]
        return String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(Array(claims.description.utf8)), as: UTF8.self)
    }

    static func post(_ port: Int, _ uid: String, _ path: String, device: String) throws -> Int {
        try RunCommandTests.curl([
            "-X", "POST", "http://127.0.0.1:\(port)/datasync/v2/toto/subscriptions/\(uid)", "-H", "Authorization: Bearer \(try token(uid))",
            "-H", "Content-Type: application/json", "--data", #"{"kind":"mobile","mode":"value","format":"v1","path":"\#(path)","context":"\#(device)"}"#,
        ]).status
    }

    @Test("alice cannot subscribe to bob's node; a room member removed from the members is revoked and receives nothing of the room after")
    func membership() async throws {
        let fakes = try await FakeProviders.start(tls: true)
        defer { Task { await fakes.stop() } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-rules-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
        try Data(Self.rules.utf8).write(to: folder.appendingPathComponent("rules.json"))
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson, deadLetter: ./dead.ndjson}
            http: {port: 0}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 60s}
            apps:
              toto:
                auth: {hs256Secret: "\(Self.secret)"}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
                rules: ./rules.json
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        try CrashTests.append([#"{"seq":1,"app":"toto","op":"put","path":"/","data":{"members":{"r1":{"alice":true,"bob":true}},"rooms":{"r1":{"title":"Lunch"}}}}"#], to: folder)

        let service = try RunningService(config: config)
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
        #expect(try Self.post(port, "alice", "/users/bob", device: "fcm-alice") == 403)
        #expect(try Self.post(port, "alice", "/users/alice", device: "fcm-alice") == 201)
        // The room's members were written by record 1: wait until it is applied.
        try await ServiceEndToEndTests.eventually("the members") { try Self.post(port, "alice", "/rooms/r1", device: "fcm-alice") == 201 }
        #expect(try Self.post(port, "bob", "/rooms/r1", device: "fcm-bob") == 201)
        #expect(try Self.post(port, "carol", "/rooms/r1", device: "fcm-carol") == 403)

        try CrashTests.append([
            #"{"seq":2,"app":"toto","op":"put","path":"/members/r1/alice","data":null}"#,
            #"{"seq":3,"app":"toto","op":"put","path":"/rooms/r1/title","data":"Secret plans"}"#,
            #"{"seq":4,"app":"toto","op":"put","path":"/rooms/r1/title","data":"More secrets"}"#,
        ], to: folder)
        // (Bob's two values may coalesce into the last: they can wait together.)
        try await ServiceEndToEndTests.eventually("bob's last event") {
            fakes.received(provider: "fcm").contains { $0.target == "fcm-bob" && String(decoding: $0.data, as: UTF8.self).contains("More secrets") }
        }
        try await Task.sleep(for: .milliseconds(300))
        let toAlice = fakes.received(provider: "fcm").filter { $0.target == "fcm-alice" }.map { String(decoding: $0.data, as: UTF8.self) }
        // (`data` is a map: the fake records it with its keys sorted.)
        #expect(toAlice == [#"{"app":"toto","r":"permission_denied","sp":"/rooms/r1","t":"revoke"}"#])
        #expect(fakes.received(provider: "fcm").allSatisfy { $0.target != "fcm-carol" })

        // Before deploying stricter rules: who they would revoke. (The store is read, never written.)
        let stricter = folder.appendingPathComponent("stricter.json")
        try Data(#"{"rules": {"users": {"$uid": {".read": "auth.uid == $uid"}}}}"#.utf8).write(to: stricter)
        let check = try Executable.run(["rules", "check", "--config", config, "--rules", stricter.path])
        #expect(check.status == 1, "some would be revoked")
        #expect(check.lines.first == "toto: 2 subscriptions checked, 1 would be revoked (permission_denied)")
        #expect(check.lines.dropFirst().first?.contains("uid bob  /rooms/r1  (mobile)") == true, "\(check.stdout)")
        let simulated = try Executable.run(["rules", "check", "--config", config, "--path", "/rooms/r1", "--auth", #"{"uid":"bob"}"#])
        #expect(simulated.status == 0)
        #expect(simulated.lines.contains("read /rooms/r1: allowed by rules/rooms/$room/.read"), "\(simulated.stdout)")
        #expect(simulated.lines.contains("data read: /members/r1/bob"))
        let outsider = try Executable.run(["rules", "check", "--config", config, "--path", "/rooms/r1", "--auth", #"{"uid":"mallory"}"#])
        #expect(outsider.status == 1)
        #expect(outsider.lines.contains("read /rooms/r1: denied"), "\(outsider.stdout)")
        let current = try Executable.run(["rules", "check", "--config", config])
        #expect(current.status == 0, "the rules in force revoke nobody more: \(current.stdout)")
        #expect(service.stop() == 0)
    }

    @Test("replay applies the rules: a subscription line carries its auth; a removed member is revoked at that record")
    func replay() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-rules-replay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data("apps: {toto: {rules: \(Self.rules)}}\n".utf8).write(to: folder.appendingPathComponent("config.yaml"))
        try Data(
            """
            {"app":"toto","uid":"alice","kind":"mobile","mode":"value","format":"v1","path":"/rooms/r1","context":"a"}
            {"app":"toto","uid":"bob","kind":"mobile","mode":"value","format":"v1","path":"/rooms/r1","context":"b","auth":{"uid":"bob","token":{"sub":"bob"}}}
            """.utf8
        ).write(to: folder.appendingPathComponent("subs.ndjson"))
        try Data(
            """
            {"seq":1,"app":"toto","op":"put","path":"/members/r1","data":{"alice":true,"bob":true}}
            {"seq":2,"app":"toto","op":"put","path":"/rooms/r1/title","data":"Lunch"}
            {"seq":3,"app":"toto","op":"put","path":"/members/r1/alice","data":null}
            {"seq":4,"app":"toto","op":"put","path":"/rooms/r1/title","data":"Dinner"}
            """.utf8
        ).write(to: folder.appendingPathComponent("changes.ndjson"))
        let result = try Executable.run([
            "replay", "--config", folder.appendingPathComponent("config.yaml").path, "--subscriptions",
            folder.appendingPathComponent("subs.ndjson").path, "--dry-run", folder.appendingPathComponent("changes.ndjson").path,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = try result.lines.map { try JSONParser.parse(Array($0.utf8)) }
        let summary = lines.map { "\($0["seq"]!) \($0["context"]!.stringValue!) \($0["payload"]!["t"]!.stringValue!)\($0["payload"]!["r"].map { " \($0.stringValue!)" } ?? "")" }
        // (Within a record, notifications come in subscription-id order.)
        #expect(summary.sorted() == ["2 a value", "2 b value", "3 a revoke permission_denied", "4 b value"], "\(result.stdout)")
    }
}
