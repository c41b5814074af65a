import Foundation
import PushCore
import PushJSON
import PushFakes
import PushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `pushdispatch run` on a PostgreSQL cluster of the test's own, a client streaming records on
/// the socket at a steady rate, deliveries flowing to the fake FCM; the cluster is stopped
/// (`pg_ctl stop -m fast`: every session cut) and started again 3 s later. The service is not
/// restarted: it reconnects by itself, `/readyz` says 503 while the store is away and 200
/// once it is back, and every record acknowledged `ok:true` is in the store and delivered. The
/// client sends again what was not answered (as a real client does, after a 2 s silence);
/// `seq` de-duplication refuses the lines the service had committed. Duplicates at the provider
/// are only sends answered while the store was away (their settlement could not be written).
@Suite("Faults: PostgreSQL restarted under a steady stream", .processLevel, .serialized, .enabled(if: PostgresTestServer.enabled))
struct PostgresRestartTests {
    static let users = 6

    /// Record `seq` adds child `n<seq>` under one of the users' paths.
    static func record(_ seq: Int) -> String {
        #"{"seq":\#(seq),"app":"toto","op":"patch","path":"/users/u\#(seq % users)","data":{"n\#(seq)":\#(seq)}}"#
    }

    /// The record numbers FCM received (answered 200), each with its arrival times.
    static func delivered(_ fakes: FakeProviders) throws -> [Int: [Int64]] {
        var numbers: [Int: [Int64]] = [:]
        for message in fakes.received(provider: "fcm") where message.status == 200 {
            let data = try JSONParser.parse(message.data)
            guard let added = data["added"]?.stringValue, let children = try JSONParser.parse(added).objectValue else { continue }
            for key in children.keys { numbers[Int(key.string.dropFirst()) ?? -1, default: []].append(message.at) }
        }
        return numbers
    }

    @Test("PostgreSQL stopped for 3 s under a steady stream: readyz 503 then 200, no restart, nothing acknowledged lost")
    func restartUnderStream() async throws {
        let server = try await onThread { try PostgresTestServer.startOwn() }
        defer { server.destroy() }
        let database = try server.createDatabase()
        let fakes = try await FakeProviders.start()
        defer { Task { await fakes.stop() } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-pg-restart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {postgres: "\(database)"}
            ingest: {socket: ./in.sock, deadLetter: ./dead.ndjson}
            http: {port: 0}
            delivery: {timeout: 30s}
            apps:
              toto:
                auth: {hs256Secret: "\(ServiceEndToEndTests.secret)"}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
            """.utf8
        ).write(to: URL(fileURLWithPath: config))

        let service = try RunningService(config: config)
        let pid = service.process.processIdentifier
        // However the test ends, the process goes (a stop that hangs must not hang the tests).
        defer { if service.process.isRunning { kill(pid, SIGKILL) } }
        let port = try await service.port()
        try await waitFor("ready") { httpStatus("http://127.0.0.1:\(port)/readyz", timeout: 5) == 200 }
        for user in 0..<Self.users {
            // Answers take 100 ms: sends are in flight when PostgreSQL goes.
            fakes.script("pg-\(user)", Array(repeating: .slow(.milliseconds(100), then: .normal), count: 2_000))
            _ = try ServiceEndToEndTests.subscribe(
                port, #"{"kind":"mobile","mode":"childEvent","format":"v1","path":"/users/u\#(user)","context":"pg-\#(user)"}"#)
        }

        let client = SteadyClient(path: folder.appendingPathComponent("in.sock").path, interval: 0.02, answerTimeout: 2, line: Self.record)
        client.start()
        defer { client.halt() }
        let watcher = ReadinessWatcher(port: port)
        defer { watcher.stop() }
        try await waitFor("records acknowledged and delivered before the restart") {
            try client.snapshot.acknowledged.count >= 100 && Self.delivered(fakes).count >= 50
        }

        // The outage: stopped, 3 s down (at least until /readyz says so), started again.
        let stoppedAt = Date()
        try await onThread { try server.stop() }
        try await waitFor("/readyz answering 503 while PostgreSQL is down", timeout: 20) { watcher.first(503, since: stoppedAt) != nil }
        let notReadyAfter = watcher.first(503, since: stoppedAt)!.timeIntervalSince(stoppedAt)
        let down = 3 - Date().timeIntervalSince(stoppedAt)
        if down > 0 { try await Task.sleep(for: .milliseconds(Int(down * 1000))) }
        let acknowledgedAtRestart = client.snapshot.acknowledged.count
        try await onThread { try server.startAgain() }
        let startedAt = Date()
        try await waitFor("/readyz answering 200 again", timeout: 30) { watcher.first(200, since: startedAt) != nil }
        let readyAgain = watcher.first(200, since: startedAt)!
        var acknowledgingAgain = Date()
        do {
            try await waitFor("a record acknowledged again after the restart", timeout: 30) {
                client.snapshot.acknowledged.count > acknowledgedAtRestart
            }
            acknowledgingAgain = Date()
            try await waitFor("records acknowledged again after the restart", timeout: 30) {
                client.snapshot.acknowledged.count >= acknowledgedAtRestart + 300
            }
        } catch {
            let state = client.snapshot
            Issue.record(
                """
                acknowledged \(state.acknowledged.count) (\(acknowledgedAtRestart) at the restart), pending \(state.pending.count), \
                reconnects \(state.reconnects), refusals \(state.refusals.prefix(3)); log:
                \(service.log.withLock { $0 }.suffix(8000))
                """)
            throw error
        }
        client.stopSending()
        try await waitFor("every record answered", timeout: 30) { client.settled }
        await client.end()
        watcher.stop()

        // The service was not restarted.
        #expect(service.process.isRunning && service.process.processIdentifier == pid, "the service stopped: \(service.log.withLock { $0 }.suffix(2000))")
        // /readyz: 200 before, 503 during the outage (nothing else but 503 or 200, or no answer in time), 200 after.
        let during = watcher.statuses(since: stoppedAt).filter { _ in true }
        #expect(Set(during).isSubset(of: [0, 200, 503]), "\(Set(during))")
        let state = client.snapshot
        let sent = state.nextSeq - 1
        // Every line sent was in the end acknowledged, or answered as a duplicate of one committed.
        #expect(state.acknowledged.union(state.repeats) == Set(1...sent), "missing: \(Set(1...sent).subtracting(state.acknowledged.union(state.repeats)).sorted().prefix(20))")
        #expect(state.refusals.allSatisfy { !$0.1.isEmpty }, "\(state.refusals.prefix(5))")

        // In the store: every record's seq in the trees' journal, the inbox drained.
        let name = String(database.split(separator: "/").last!)
        try await waitFor("the inbox drained", timeout: 30) {
            try server.psql(name, "SELECT count(*) FROM inbox").text.trimmingCharacters(in: .whitespacesAndNewlines) == "0"
        }
        let journalled = try server.psql(
            name, #"SELECT m[1] FROM tree_journal, regexp_matches(convert_from(records, 'UTF8'), '"seq":(\d+)', 'g') AS m"#
        ).text.split(separator: "\n").compactMap { Int($0) }
        #expect(Set(journalled) == Set(1...sent), "not journalled: \(Set(1...sent).subtracting(journalled).sorted().prefix(20))")
        #expect(journalled.count == Set(journalled).count, "records journalled twice: \(journalled.count - Set(journalled).count)")

        // Every record delivered; twice only when the first send was answered while the store was away.
        do {
            try await waitFor("every record delivered", timeout: 60) { try Self.delivered(fakes).count >= sent }
        } catch {
            let missing = Set(1...sent).subtracting(try Self.delivered(fakes).keys).sorted()
            let outbox = try? server.psql(name, "SELECT id, record_seq, attempts, next_attempt_at, claimed_until, claimed_by FROM notification ORDER BY id LIMIT 20").text
            Issue.record("not delivered: \(missing.prefix(20)) (\(missing.count)); outbox: \(outbox ?? "?"); log: \(service.log.withLock { $0 }.suffix(4000))")
            throw error
        }
        let delivered = try Self.delivered(fakes)
        #expect(Set(delivered.keys) == Set(1...sent), "not delivered: \(Set(1...sent).subtracting(delivered.keys).sorted().prefix(20))")
        let outage = (Int64(stoppedAt.timeIntervalSince1970 * 1000) - 2_000)...(Int64(readyAgain.timeIntervalSince1970 * 1000) + 2_000)
        let duplicates = delivered.filter { $0.value.count > 1 }
        #expect(duplicates.allSatisfy { outage.contains($0.value.min()!) }, "\(duplicates.filter { !outage.contains($0.value.min()!) }.prefix(5))")

        let log = service.log.withLock { $0 }
        print(
            """
            PostgreSQL restart: /readyz 503 after \(String(format: "%.2f", notReadyAfter)) s; 200 again \(String(format: "%.2f", readyAgain.timeIntervalSince(startedAt))) s \
            after the start; records acknowledged again \(String(format: "%.2f", acknowledgingAgain.timeIntervalSince(startedAt))) s after it; \
            \(sent) records, \(state.acknowledged.count) acknowledged, \(state.repeats.count) answered as duplicates after \(state.reconnects) reconnections \
            (\(state.resent) lines resent), longest silence \(String(format: "%.2f", state.longestSilence)) s, \(duplicates.count) duplicated at FCM; \
            log: \(log.components(separatedBy: "ingestion is held up").count - 1) held-up writes, \
            \(log.components(separatedBy: "the connection was closed before the query was answered").count - 1) lost queries, \
            \(log.components(separatedBy: "delivery results cannot be stored").count - 1) settlements retried
            """)
        #expect(await service.stop(within: 30) == 0, "\(service.log.withLock { $0 }.suffix(3000))")
    }

    @Test("SIGTERM while PostgreSQL is down and a write is held up: the stop gives up at instance.shutdownTimeout, says so, exits non-zero")
    func stopWhileStoreAway() async throws {
        let server = try await onThread { try PostgresTestServer.startOwn() }
        defer { server.destroy() }
        let database = try server.createDatabase()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-pg-stop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {postgres: "\(database)"}
            ingest: {socket: ./in.sock, deadLetter: ./dead.ndjson}
            http: {port: 0}
            delivery: {enabled: false}
            instance: {shutdownTimeout: 3s}
            apps: {toto: {auth: {hs256Secret: "\(ServiceEndToEndTests.secret)"}}}
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        let service = try RunningService(config: config)
        let pid = service.process.processIdentifier
        defer { if service.process.isRunning { kill(pid, SIGKILL) } }
        let port = try await service.port()
        try await waitFor("ready") { httpStatus("http://127.0.0.1:\(port)/readyz", timeout: 5) == 200 }

        // The store goes away; a record comes in and its write is held up (no answer).
        try await onThread { try server.stop() }
        let socket = try SocketClient(path: folder.appendingPathComponent("in.sock").path)
        socket.send(Self.record(1) + "\n")
        #expect(try await onThread { socket.answers(1, timeout: 2) }.isEmpty, "answered while the store is away")

        // SIGTERM: the stop waits for the write up to the deadline, then gives up.
        let stopping = Date()
        let status = await service.stop(within: 30)
        let took = Date().timeIntervalSince(stopping)
        let log = service.log.withLock { $0 }
        #expect(status != nil, "still running 30 s after SIGTERM: \(log.suffix(1500))")
        #expect(status != 0, "a stop that gave up must not look clean")
        #expect(took >= 2.5 && took < 20, "stopped after \(took) s")
        #expect(log.contains("instance.shutdownTimeout"), "\(log.suffix(1500))")
        // Nothing was acknowledged for the record held up.
        #expect(try await onThread { socket.answers(1, timeout: 0.5) }.allSatisfy { !$0.contains(#""ok":true"#) })
    }
}
