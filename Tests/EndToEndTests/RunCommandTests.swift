import Foundation
import PushFakes
import PushTestSupport
import PushCore
import PushJSON
import PushJOSE
import Synchronization
import Testing

/// `pushdispatch run` as a process, driven with curl.
final class RunningService: Sendable {
    let process: Process
    let log = Mutex("")

    /// Starts `pushdispatch run --config config`, inside the network namespace `namespace` when
    /// one is given (``TestNetwork``), with `environment` added to this process's.
    init(config: String, namespace: String? = nil, environment: [String: String] = [:]) throws {
        if let namespace {
            let command = TestNetwork.command(in: namespace, Executable.url.path, ["run", "--config", config])
            process = TestProcesses.make(command.executable, command.arguments)
        } else {
            process = TestProcesses.make(Executable.url, ["run", "--config", config])
        }
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        try TestProcesses.launch(process)
        stderr.fileHandleForReading.readabilityHandler = { [self] handle in
            let data = handle.availableData
            if !data.isEmpty { self.log.withLock { $0 += String(decoding: data, as: UTF8.self) } }
        }
    }

    /// The port from the log's `listening … port=N` line.
    func port() async throws -> Int {
        for _ in 0..<300 {
            // Whole lines only: the log arrives in chunks, and a chunk may end inside the line
            // (after "port=", or between two digits).
            let text = log.withLock { $0 }
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            if let line = lines.first(where: { $0.contains("listening") && $0.contains("port=") }),
                let range = line.range(of: "port="), let port = Int(line[range.upperBound...].prefix { $0.isNumber })
            {
                return port
            }
            if !process.isRunning { throw ServiceError(message: "the service stopped: \(text)") }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ServiceError(message: "no listening line in: \(log.withLock { $0 })")
    }

    /// SIGTERM, then wait: a graceful stop.
    func stop() -> Int32 {
        process.terminate()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// SIGTERM, then wait at most `seconds`; past them, SIGKILL and `nil` (the stop hung).
    func stop(within seconds: Double) async -> Int32? {
        process.terminate()
        let end = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < end { try? await Task.sleep(for: .milliseconds(20)) }
        guard !process.isRunning else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        return process.terminationStatus
    }

    struct ServiceError: Error { let message: String }
}

@Suite("pushdispatch run and subscriptions, as processes", .processLevel, .serialized)
struct RunCommandTests {
    static let secret = "toto-secret-of-at-least-thirty-two-bytes"

    static func folder() throws -> URL {
        setenv("TOTO_AUTH_SECRET", Self.secret, 1)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let config = """
            store: {sqlite: ./pushdispatch.db}
            http: {port: 0}
            apps:
              toto:
                auth: {hs256Secret: env:TOTO_AUTH_SECRET}
            """
        try Data(config.utf8).write(to: folder.appendingPathComponent("pushdispatch.yaml"))
        return folder
    }

    static func token(subject: String = "u1") throws -> String {
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        let claims: JSON = ["sub": .string(subject), "exp": .int(Int64(Date().timeIntervalSince1970) + 600)]
        return String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(Array(claims.description.utf8)), as: UTF8.self)
    }

    /// Runs curl; returns the status, headers and body.
    static func curl(_ arguments: [String]) throws -> (status: Int, headers: [String: String], body: String) {
        let process = TestProcesses.make(URL(fileURLWithPath: "/usr/bin/curl"), ["-s", "-i"] + arguments)
        let output = Pipe()
        process.standardOutput = output
        try TestProcesses.launch(process)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = parts[0].components(separatedBy: "\r\n")
        // No answer (refused, timed out, a service that died): an error, never a trap that
        // takes every other test down with this process.
        let statusLine = head[0].split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw RunningService.ServiceError(
                message: "curl \(arguments.filter { $0.hasPrefix("http") }.joined(separator: " ")) got no HTTP answer (status \(process.terminationStatus)): \(text.prefix(200))")
        }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            if let colon = line.firstIndex(of: ":") {
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return (status, headers, parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    @Test("the documented curl requests, a restart, and the operator commands")
    func documentedCurlRequests() async throws {
        let folder = try Self.folder()
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        setenv("TOTO_AUTH_SECRET", Self.secret, 1)
        let service = try RunningService(config: config)
        let port = try await service.port()
        let token = try Self.token()
        let base = "http://127.0.0.1:\(port)/datasync/v2/toto/subscriptions/u1"

        // curl -X POST "$BASE?allowsUpdate=true" -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" \
        //      -d '{"kind":"mobile","mode":"value","path":"/users/u1","context":"<FCM token>"}'
        let body = #"{"kind":"mobile","mode":"value","path":"/users/u1","context":"fcm-device-token"}"#
        let create = try Self.curl([
            "-X", "POST", base + "?allowsUpdate=true", "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: application/json",
            "-d", body,
        ])
        #expect(create.status == 201)
        let location = try #require(create.headers["content-location"])
        let again = try Self.curl([
            "-X", "POST", base + "?allowsUpdate=true", "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: application/json",
            "-d", body,
        ])
        #expect(again.status == 200)
        // curl -X DELETE "http://…$LOCATION" -H "Authorization: Bearer $TOKEN"
        let delete = try Self.curl(["-X", "DELETE", "http://127.0.0.1:\(port)" + location, "-H", "Authorization: Bearer \(token)"])
        #expect(delete.status == 204)

        // A subscription survives a restart.
        let kept = try Self.curl([
            "-X", "POST", base, "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: application/json",
            "-d", #"{"kind":"mobile","path":"/users/u1/inbox","context":"t2"}"#,
        ])
        #expect(kept.status == 201)
        #expect(service.stop() == 0)
        let restarted = try RunningService(config: config)
        let newPort = try await restarted.port()
        let list = try Self.curl(["http://127.0.0.1:\(newPort)/datasync/v2/toto/subscriptions/u1", "-H", "Authorization: Bearer \(token)"])
        #expect(list.status == 200)
        let documents = try JSONParser.parse(list.body).arrayValue ?? []
        #expect(documents.count == 1 && documents[0]["path"] == "/users/u1/inbox")
        let id = try #require(documents.first?["id"]?.stringValue)

        // Operators list, show and remove beside the running service.
        let listed = try Executable.run(["subscriptions", "list", "--config", config])
        #expect(listed.status == 0 && listed.lines.count == 1 && listed.lines[0].contains(id))
        #expect(try Executable.run(["subscriptions", "list", "--config", config, "--app", "toto", "--uid", "u2"]).lines.isEmpty)
        #expect(try Executable.run(["subscriptions", "show", id, "--config", config]).stdout.contains(#""context":"t2""#))
        #expect(try Executable.run(["subscriptions", "remove", id, "--config", config]).status == 0)
        let missing = try Executable.run(["subscriptions", "show", id, "--config", config])
        #expect(missing.status != 0 && missing.stderr.contains("no subscription \(id)"))
        let after = try Self.curl(["http://127.0.0.1:\(newPort)/datasync/v2/toto/subscriptions/u1", "-H", "Authorization: Bearer \(token)"])
        #expect(after.body == "[]")
        #expect(restarted.stop() == 0)
    }

    @Test("a bad configuration stops run with the key, the problem and what was expected")
    func badConfiguration() throws {
        let folder = try Self.folder()
        let path = folder.appendingPathComponent("bad.yaml")
        try Data("http: {port: many}\n".utf8).write(to: path)
        let result = try Executable.run(["run", "--config", path.path])
        #expect(result.status != 0)
        #expect(result.stderr.contains("http.port: expected an integer"), "\(result.stderr)")
        let missing = try Executable.run(["run", "--config", folder.appendingPathComponent("none.yaml").path])
        #expect(missing.stderr.contains("cannot read the configuration file"))
    }

    @Test("a second run on the same SQLite file, or on another's live socket, stops with a message; the first one goes on")
    func secondProcessRefused() async throws {
        let folder = try Self.folder()
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data("store: {sqlite: ./pushdispatch.db}\ningest: {socket: ./in.sock}\nhttp: {port: 0}\napps: {toto: {auth: {hs256Secret: env:TOTO_AUTH_SECRET}}}\n".utf8)
            .write(to: URL(fileURLWithPath: config))
        let first = try RunningService(config: config)
        defer { _ = first.stop() }
        _ = try await first.port()
        // The database is the owner's only.
        let mode = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent("pushdispatch.db").path)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        let second = try Executable.run(["run", "--config", config])
        #expect(second.status != 0)
        #expect(second.stderr.contains("another pushdispatch process is running on the SQLite database"), "\(second.stderr)")

        // Another database, the same socket: the live socket is not taken over.
        let other = folder.appendingPathComponent("other.yaml").path
        try Data("store: {sqlite: ./other.db}\ningest: {socket: ./in.sock}\nhttp: {port: 0}\napps: {toto: {auth: {hs256Secret: env:TOTO_AUTH_SECRET}}}\n".utf8)
            .write(to: URL(fileURLWithPath: other))
        let third = try Executable.run(["run", "--config", other])
        #expect(third.status != 0)
        #expect(third.stderr.contains("in.sock: another process listens on it"), "\(third.stderr)")
        #expect(first.process.isRunning)
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("in.sock").path))
    }

    @Test("a SQLite database its group or others may read is refused, with the chmod to run")
    func openDatabaseRefused() throws {
        let folder = try Self.folder()
        let database = folder.appendingPathComponent("pushdispatch.db").path
        FileManager.default.createFile(atPath: database, contents: nil, attributes: [.posixPermissions: 0o644])
        let result = try Executable.run(["run", "--config", folder.appendingPathComponent("pushdispatch.yaml").path])
        #expect(result.status != 0)
        #expect(result.stderr.contains("readable or writable by its group or others"), "\(result.stderr)")
        #expect(result.stderr.contains("chmod 600 \(database)"), "\(result.stderr)")
    }

    @Test("a seq near Int64.max blocks its source until checkpoints reset moves the watermark back (refused while run holds the store)")
    func checkpointsReset() async throws {
        let folder = try Self.folder()
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data("store: {sqlite: ./pushdispatch.db}\ningest: {queueFile: ./changes.ndjson, deadLetter: ./dead.ndjson}\nhttp: {port: 0}\napps: {toto: {auth: {hs256Secret: env:TOTO_AUTH_SECRET}}}\n".utf8)
            .write(to: URL(fileURLWithPath: config))
        let queue = folder.appendingPathComponent("changes.ndjson")
        func append(_ line: String) throws {
            if !FileManager.default.fileExists(atPath: queue.path) { FileManager.default.createFile(atPath: queue.path, contents: nil) }
            let handle = try FileHandle(forWritingTo: queue)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data((line + "\n").utf8))
            try handle.close()
        }
        func deadLetters() -> [String] {
            ((try? String(contentsOf: folder.appendingPathComponent("dead.ndjson"), encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        try append(#"{"seq":1,"app":"toto","op":"put","path":"/a","data":1}"#)
        try append(#"{"seq":9223372036854775806,"app":"toto","op":"put","path":"/a","data":2}"#)
        try append(#"{"seq":2,"app":"toto","op":"put","path":"/a","data":3}"#)
        let service = try RunningService(config: config)
        _ = try await service.port()
        try await ServiceEndToEndTests.eventually("seq 2 dead-lettered") { deadLetters().count == 1 }
        #expect(deadLetters()[0].contains("goes back from the last accepted seq 9223372036854775806"))
        let listed = try Executable.run(["checkpoints", "--config", config])
        #expect(listed.status == 0)
        #expect(listed.lines.contains { $0.hasPrefix("queue-file\t9223372036854775806\t") }, "\(listed.stdout)")
        let refused = try Executable.run(["checkpoints", "reset", "--config", config, "--source", "queue-file", "--seq", "1"])
        #expect(refused.status == 1 && refused.stderr.contains("stop the service first"), "\(refused.stderr)")
        #expect(service.stop() == 0)

        let reset = try Executable.run(["checkpoints", "reset", "--config", config, "--source", "queue-file", "--seq", "2"])
        #expect(reset.status == 0, "\(reset.stderr)")
        #expect(try Executable.run(["checkpoints", "reset", "--config", config, "--source", "nope", "--none"]).stderr.contains("no source nope; the store has: queue-file"))
        try append(#"{"seq":3,"app":"toto","op":"put","path":"/a","data":4}"#)
        let again = try RunningService(config: config)
        defer { _ = again.stop() }
        _ = try await again.port()
        try await ServiceEndToEndTests.eventually("seq 3 accepted") {
            try Executable.run(["checkpoints", "--config", config]).lines.contains { $0.hasPrefix("queue-file\t3\t") }
        }
        #expect(deadLetters().count == 1)
    }

    @Test("the socket gets ingest.socketMode; a client that never reads its answers holds neither another client nor SIGTERM, and loses nothing")
    func stuckSocketClient() async throws {
        let folder = try Self.folder()
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {sqlite: ./pushdispatch.db}
            ingest: {socket: ./in.sock, deadLetter: ./dead.ndjson, socketShutdownGrace: 1s}
            http: {port: 0}
            apps: {toto: {auth: {hs256Secret: env:TOTO_AUTH_SECRET}}}

            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        let socket = folder.appendingPathComponent("in.sock").path
        var service = try RunningService(config: config)
        _ = try await service.port()
        let mode = try FileManager.default.attributesOfItem(atPath: socket)[.posixPermissions] as? Int
        #expect(mode == 0o660, "the socket's mode is \(String(mode ?? 0, radix: 8))")

        // 60,000 records sent without reading a single answer: the answers fill the socket,
        // the service stops reading this client.
        let count = 60_000
        let stream = Array((1...count).map { #"{"seq":\#($0),"app":"toto","op":"put","path":"/a","data":\#($0)}"# + "\n" }.joined().utf8)
        let stuck = try SocketClient(path: socket)
        var sent = 0
        var stalled = 0
        while sent < stream.count && stalled < 25 {
            let taken = stuck.trySend(stream[sent..<min(stream.count, sent + 65_536)])
            if taken > 0 {
                sent += taken
                stalled = 0
            } else {
                stalled += 1
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(sent < stream.count, "the service read all 60,000 records of a client that reads no answer")
        // Another client is answered all the same (a line that is not a record: refused at once).
        let other = try SocketClient(path: socket)
        other.send("not a record\n")
        let answer = try await onThread { other.answers(1, timeout: 10) }
        #expect(answer.first?.contains(#""ok":false"#) == true, "\(answer)")

        let stopping = Date()
        #expect(await service.stop(within: 30) == 0)
        let took = Date().timeIntervalSince(stopping)
        #expect(took < 10, "SIGTERM took \(took) s with a client not reading its answers (grace 1 s)")
        #expect(service.log.withLock { $0 }.contains("closing a socket connection whose answers were not taken within the shutdown grace"))

        // The client sends again from where its answers stopped (here, from the start): what
        // the service had committed is answered duplicate (not dead-lettered), the rest is
        // accepted, and the source ends at the last seq: nothing lost, nothing twice.
        service = try RunningService(config: config)
        _ = try await service.port()
        let again = try SocketClient(path: socket)
        async let answers = onThread { again.answers(count, timeout: 120) }
        try await onThread { again.send(String(decoding: stream, as: UTF8.self)) }
        let replies = try await answers
        #expect(replies.count == count)
        let accepted = replies.filter { $0.contains(#""ok":true"#) }.count
        let already = replies.filter { $0.contains(#""ok":true,"duplicate":true,"watermark":"#) }.count
        #expect(replies.allSatisfy { $0.contains(#""ok":true"#) }, "\(replies.filter { !$0.contains(#""ok":true"#) }.prefix(3))")
        #expect(already > 0 && accepted > already, "accepted \(accepted), already \(already)")
        // The one refused line is the other client's.
        let letters = try String(contentsOf: folder.appendingPathComponent("dead.ndjson"), encoding: .utf8).split(separator: "\n")
        #expect(letters.count == 1 && letters.first?.contains("not a record") == true, "\(letters.count) dead letters")
        #expect(service.stop() == 0)
        let listed = try Executable.run(["checkpoints", "--config", config])
        #expect(listed.lines.contains { $0.hasPrefix("socket\t\(count)\t") }, "\(listed.stdout)")
    }

    @Test("a record resent through the socket is answered ok with duplicate and the watermark, not dead-lettered, counted in /metrics; after a restart too")
    func socketResends() async throws {
        let folder = try Self.folder()
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {sqlite: ./pushdispatch.db}
            ingest: {socket: ./in.sock, deadLetter: ./dead.ndjson}
            http: {port: 0}
            apps: {toto: {auth: {hs256Secret: env:TOTO_AUTH_SECRET}}}

            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        let socket = folder.appendingPathComponent("in.sock").path
        func record(_ seq: Int) -> String { #"{"seq":\#(seq),"app":"toto","op":"put","path":"/a","data":\#(seq)}"# + "\n" }
        func send(_ seqs: [Int]) async throws -> [String] {
            // Closed when it goes (its deinit): closing it here too would close a descriptor
            // number another file may have taken meanwhile.
            let client = try SocketClient(path: socket)
            client.send(seqs.map(record).joined())
            return try await onThread { client.answers(seqs.count, timeout: 30) }
        }
        func deadLetters() -> Int {
            ((try? String(contentsOf: folder.appendingPathComponent("dead.ndjson"), encoding: .utf8)) ?? "").split(separator: "\n").count
        }
        func duplicates(_ port: Int) throws -> Double? {
            ProviderDownTests.metric(try Self.curl(["http://127.0.0.1:\(port)/metrics"]).body, #"pushdispatch_records_duplicate_total{source="socket"}"#)
        }
        var service = try RunningService(config: config)
        var port = try await service.port()
        #expect(try duplicates(port) == 0)
        #expect(try await send([1, 2, 3]) == [#"{"seq":1,"ok":true}"#, #"{"seq":2,"ok":true}"#, #"{"seq":3,"ok":true}"#])
        // The client lost its answers for 2 and 3 and sends them again, with 4.
        #expect(
            try await send([2, 3, 4]) == [
                #"{"seq":2,"ok":true,"duplicate":true,"watermark":3}"#, #"{"seq":3,"ok":true,"duplicate":true,"watermark":3}"#, #"{"seq":4,"ok":true}"#,
            ])
        #expect(try duplicates(port) == 2)
        #expect(deadLetters() == 0, "a resend was dead-lettered")
        #expect(service.stop() == 0)

        // After a restart, the watermark is the checkpoint's.
        service = try RunningService(config: config)
        defer { _ = service.stop() }
        port = try await service.port()
        #expect(try await send([1, 5]) == [#"{"seq":1,"ok":true,"duplicate":true,"watermark":4}"#, #"{"seq":5,"ok":true}"#])
        #expect(try duplicates(port) == 1)
        #expect(deadLetters() == 0, "a resend was dead-lettered")
        let listed = try Executable.run(["checkpoints", "--config", config])
        #expect(listed.lines.contains { $0.hasPrefix("socket\t5\t") }, "\(listed.stdout)")
    }

    @Test("http.operationsToken: /metrics and /status answer only with the token; probes stay open; pushdispatch status sends it")
    func operationsToken() async throws {
        let folder = try Self.folder()
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        setenv("PD_TEST_OPERATIONS_TOKEN", "ops-token-0123456789abcdef", 1)
        try Data(
            """
            store: {sqlite: ./pushdispatch.db}
            http: {port: 0, operationsToken: env:PD_TEST_OPERATIONS_TOKEN}
            apps: {toto: {auth: {hs256Secret: env:TOTO_AUTH_SECRET}}}

            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        let service = try RunningService(config: config)
        defer { _ = service.stop() }
        let port = try await service.port()
        for path in ["/metrics", "/status", "/ops/v1/overview", "/ops/v1/senders", "/ops/v1/subscriptions?uid=u1"] {
            let missing = try Self.curl(["http://127.0.0.1:\(port)\(path)"])
            #expect(missing.status == 401 && missing.headers["www-authenticate"] == "Bearer realm=\"pushdispatch-operations\"", "\(path)")
            #expect(missing.body.contains("\"error\":\"unauthorized\"") && missing.body.contains("http.operationsToken"), "\(missing.body)")
            let wrong = try Self.curl(["-H", "Authorization: Bearer ops-token-0123456789abcdeX", "http://127.0.0.1:\(port)\(path)"])
            #expect(wrong.status == 401 && wrong.headers["www-authenticate"]?.contains("invalid_token") == true, "\(path)")
            #expect(!wrong.body.contains("ops-token"), "a message never shows a token")
            let right = try Self.curl(["-H", "Authorization: Bearer ops-token-0123456789abcdef", "http://127.0.0.1:\(port)\(path)"])
            #expect(right.status == 200, "\(path)")
        }
        #expect(try Self.curl(["http://127.0.0.1:\(port)/healthz"]).status == 200)
        #expect(try Self.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200)
        // `status --config` reads the token from the configuration; `--url` without one is told why.
        let statusConfig = try Self.statusConfiguration(config, port: port, in: folder)
        let status = try Executable.run(["status", "--config", statusConfig])
        #expect(status.status == 0 && status.stdout.contains("outbox"), "\(status.stderr)")
        let refused = try Executable.run(["status", "--url", "http://127.0.0.1:\(port)"])
        #expect(refused.status == 1 && refused.stderr.contains("answered 401 (the service requires its operations token"), "\(refused.stderr)")
    }

    @Test("no operations token and a bind beyond loopback: /metrics and /status refuse (403, saying how), probes stay open, config check warns")
    func operationsClosedBeyondLoopback() async throws {
        let folder = try Self.folder()
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {sqlite: ./pushdispatch.db}
            http: {host: 0.0.0.0, port: 0}
            apps: {toto: {auth: {hs256Secret: env:TOTO_AUTH_SECRET}}}

            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        let check = try Executable.run(["config", "check", config])
        #expect(check.status == 0 && check.stderr.contains("warning: http.operationsToken: not set, and http.host 0.0.0.0 is not a loopback address"), "\(check.stderr)")
        let service = try RunningService(config: config)
        defer { _ = service.stop() }
        let port = try await service.port()
        for path in ["/metrics", "/status", "/ops/v1/overview", "/ops/v1/records/toto/1", "/ops/v1/events"] {
            let refused = try Self.curl(["http://127.0.0.1:\(port)\(path)"])
            #expect(refused.status == 403 && refused.body.contains("\"error\":\"forbidden\""), "\(path): \(refused.status) \(refused.body)")
            #expect(refused.body.contains("http.operationsToken is not set and the service listens on 0.0.0.0"), "\(refused.body)")
        }
        #expect(try Self.curl(["http://127.0.0.1:\(port)/healthz"]).status == 200)
        #expect(try Self.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200)
        let statusConfig = try Self.statusConfiguration(config, port: port, in: folder)
        let status = try Executable.run(["status", "--config", statusConfig])
        #expect(status.status == 1 && status.stderr.contains("answered 403 (the service listens beyond loopback"), "\(status.stderr)")
    }

    /// A copy of `config` naming the port a service started with `port: 0` took, for `status --config`.
    static func statusConfiguration(_ config: String, port: Int, in folder: URL) throws -> String {
        let fixed = try String(contentsOfFile: config, encoding: .utf8).replacingOccurrences(of: "port: 0", with: "port: \(port)")
        let path = folder.appendingPathComponent("status.yaml").path
        try Data(fixed.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }
}
