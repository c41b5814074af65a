import Foundation
import PushCore
import PushJSON
import PushTestSupport
import Testing

/// The sample app of the library (`pushdispatch-client-sample`), as the README runs it.
@Suite("The library's sample app, as a process", .processLevel, .serialized)
struct ClientLibrarySampleTests {
    /// `pushdispatch-client-sample`, built next to `pushdispatch`.
    static var sample: URL { Executable.url.deletingLastPathComponent().appendingPathComponent("pushdispatch-client-sample") }

    @Test("subscribe end to end with a dev token, then read what FCM received and what replay prints; a forged line is refused")
    func subscribeThenRead() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        let secretVariable = ["TOTO_AUTH_SECRET": ClientLibraryHarness.secret]
        let token = try Executable.run(Self.sample, ["dev-token", "--uid", "alice", "--secret-env", "TOTO_AUTH_SECRET"], environment: secretVariable)
        #expect(token.status == 0, "\(token.stderr)")
        let environment = ["PUSHDISPATCH_TOKEN": token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)]
        let keyFile = harness.folder.appendingPathComponent("device-key.json").path
        let common = ["--url", "http://127.0.0.1:\(harness.port)", "--app", "toto", "--device", "fcm:sample-phone", "--key-file", keyFile]

        let subscribed = try Executable.run(
            Self.sample, ["subscribe"] + common + ["--uid", "alice", "--path", "/rooms/lobby", "--mode", "value", "--encrypt"],
            environment: environment)
        #expect(subscribed.status == 0 && subscribed.stdout.contains("on /rooms/lobby (value, mobile device sample-pho"), "\(subscribed.stdout)\(subscribed.stderr)")
        let mode = try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let listed = try Executable.run(Self.sample, ["list"] + common + ["--uid", "alice"], environment: environment)
        #expect(listed.stdout.split(separator: "\n").count == 1)

        // What the device received through FCM, read by the sample.
        try harness.write([("toto", "put", "/rooms/lobby", #"{"message":"hello"}"#)])
        let received = try await harness.fcmData("sample-phone", count: 1)[0]
        var line = JSONWriter()
        line.write(.object(JSONObject(received.map { (Key($0.key), JSON.string($0.value)) })))
        var forged = received
        forged["evt"] = String(received["evt"]!.dropLast(4)) + "AAAA"
        var forgedLine = JSONWriter()
        forgedLine.write(.object(JSONObject(forged.map { (Key($0.key), JSON.string($0.value)) })))
        let read = try Executable.run(Self.sample, ["read"] + common, input: line.string + "\n" + forgedLine.string + "\n")
        let lines = read.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == #"/rooms/lobby value {"message":"hello"} (OK, v2, endToEnd)"#, "\(read.stdout)\(read.stderr)")
        #expect(lines.count == 2 && lines[1].hasPrefix("refused: wrong_key: wrong key:"), "\(read.stdout)")
        #expect(read.status == 1)

        // The README's way: what `pushdispatch replay` says the device would get, read by the sample.
        let changes = harness.folder.appendingPathComponent("readme-changes.ndjson")
        try Data(#"{"seq":1,"app":"toto","op":"put","path":"/rooms/lobby","data":{"message":"hi"}}"#.utf8).write(to: changes)
        let replay = try Executable.run(["replay", "--config", harness.folder.appendingPathComponent("pushdispatch.yaml").path, "--dry-run", changes.path])
        #expect(replay.status == 0, "\(replay.stderr)")
        let fromReplay = try Executable.run(Self.sample, ["read"] + common, input: replay.stdout)
        #expect(fromReplay.stdout == "/rooms/lobby value {\"message\":\"hi\"} (OK, v2, endToEnd)\n", "\(fromReplay.stdout)\(fromReplay.stderr)")

        let removed = try Executable.run(Self.sample, ["unsubscribe-all"] + common + ["--uid", "alice"], environment: environment)
        #expect(removed.stdout == "removed 1 subscriptions\n", "\(removed.stdout)\(removed.stderr)")
    }
}
