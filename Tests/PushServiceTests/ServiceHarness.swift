import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PushCore
import PushJSON
import PushAPI
import PushJOSE
import PushTestSupport
import Synchronization
@testable import PushService

/// A running service on a free loopback port, with its own folder, configuration and clock.
final class ServiceHarness: Sendable {
    static let secret = "toto-secret-of-at-least-thirty-two-bytes"
    static let otherSecret = "other-secret-of-at-least-thirty-two-bytes"
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures")

    let folder: URL
    let client: HTTPClient
    private let task: Mutex<Task<Void, any Error>?> = Mutex(nil)
    private let portValue = Mutex(0)

    var port: Int { portValue.withLock { $0 } }
    var base: String { "http://127.0.0.1:\(port)" }

    let limits: ConnectionLimits
    /// The service's one clock: tests advance it.
    let clock: ManualClock
    /// Tasks of the service that sleep on the clock between rounds: the expiry sweeper, the
    /// index follower and the history's pruner.
    static let sleepers = 3

    /// The ingest sources in the harness's folder (when made with `ingest: true`).
    var queueFile: URL { folder.appendingPathComponent("changes.ndjson") }
    var socketPath: String { folder.appendingPathComponent("in.sock").path }
    var deadLetterFile: URL { folder.appendingPathComponent("dead.ndjson") }
    let tuning: ServiceRuntime.Tuning

    /// - Parameter now: the clock's time at start, in Unix seconds.
    init(
        folder: URL? = nil, now: Int64 = 1_800_000_000, limits: ConnectionLimits = .standard, ingest: Bool = false,
        batchLines: Int = 2_000, snapshotAfterBytes: Int? = nil, store: String = "{sqlite: ./store.db}", instance: String? = nil,
        rules: String? = nil, maxRecordBytes: String? = nil
    ) throws {
        self.limits = limits
        self.tuning = ServiceRuntime.Tuning(
            followInterval: .milliseconds(100), connectionLimits: limits, ingest: .init(batchLines: batchLines), snapshotAfterBytes: snapshotAfterBytes)
        self.folder = folder ?? FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-api-\(UUID().uuidString)")
        self.clock = ManualClock(start: now * 1_000)
        try FileManager.default.createDirectory(at: self.folder, withIntermediateDirectories: true)
        let keys = Self.fixtures.appendingPathComponent("jose/test-keyset.json").path
        let longest = maxRecordBytes.map { ", maxRecordBytes: \($0)" } ?? ""
        let ingestSection = ingest ? "ingest: {queueFile: ./changes.ndjson, socket: ./in.sock, deadLetter: ./dead.ndjson\(longest)}\n" : ""
        let instanceSection = instance.map { "instance: \($0)\n" } ?? ""
        let configuration = ingestSection + instanceSection + """
            store: \(store)
            http: {host: 127.0.0.1, port: 0}
            delivery: {enabled: false}   # these tests read the outbox as ingestion left it
            expiry: {interval: 1s}
            apps:
              toto:
                auth: {hs256Secret: "\(Self.secret)"}
                webhooks: {orders: {url: "https://example.com/hooks/orders", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
                keys: \(keys)
                signingKey: sig-es
                subscriptions: {defaultLifetime: 7d, maxLifetime: 30d}\(rules.map { "\n    rules: \($0)" } ?? "")
              other:
                auth: {hs256Secret: "\(Self.otherSecret)"}
            """
        try Data(configuration.utf8).write(to: self.folder.appendingPathComponent("pushdispatch.yaml"))
        // Generous deadlines: CI runs these suites side by side with PostgreSQL and the crash tests on 2 cores,
        // and a loopback connect has been seen to wait past the client's default 10 s there. The tests check
        // answers, not timing.
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.timeout = .init(connect: .seconds(60), read: .seconds(60))
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
    }

    /// Appends record lines to the queue file (creating it), as the database would.
    func appendToQueueFile(_ lines: [String]) throws {
        try appendToQueueFile(bytes: Array(lines.map { $0 + "\n" }.joined().utf8))
    }

    /// Appends raw bytes to the queue file (creating it).
    func appendToQueueFile(bytes: [UInt8]) throws {
        if !FileManager.default.fileExists(atPath: queueFile.path) {
            guard FileManager.default.createFile(atPath: queueFile.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: queueFile.path])
            }
        }
        let handle = try FileHandle(forWritingTo: queueFile)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
    }

    /// Replaces toto's read rules in the configuration (the next start reads them).
    func setRules(_ rules: String) throws {
        let url = folder.appendingPathComponent("pushdispatch.yaml")
        var text = try String(contentsOf: url, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("    rules: ") }
        text = lines.joined(separator: "\n").replacingOccurrences(
            of: "subscriptions: {defaultLifetime: 7d, maxLifetime: 30d}", with: "subscriptions: {defaultLifetime: 7d, maxLifetime: 30d}\n    rules: \(rules)")
        try Data(text.utf8).write(to: url)
    }

    /// Starts the service and waits until it listens.
    func start() async throws {
        let configuration = try ConfigurationLoader.load(path: folder.appendingPathComponent("pushdispatch.yaml").path, environment: [:])
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let runtime = ServiceRuntime(configuration: configuration, logger: logger, clock: clock, tuning: tuning)
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let task = Task {
            defer { continuation.finish() }  // ends the wait below if the service fails to start
            try await runtime.run { port in continuation.yield(port) }
        }
        self.task.withLock { $0 = task }
        for await port in ports {
            portValue.withLock { $0 = port }
            return
        }
        _ = try await task.value
        throw CancellationError()
    }

    /// Moves the service's clock forward and waits until the tasks it woke went back to sleep.
    func advance(by duration: Duration) async {
        clock.advance(by: duration)
        await clock.waitForSleepers(Self.sleepers)
    }

    /// Stops the service (graceful shutdown) and waits for it.
    func stop() async {
        let task = self.task.withLock { task in
            defer { task = nil }
            return task
        }
        task?.cancel()
        _ = await task?.result
    }

    func shutdown() async {
        await stop()
        try? await client.shutdown()
    }

    /// A bearer token for `subject`, signed with `secret`, valid around the harness clock.
    func token(
        subject: String? = "u1", secret: String = ServiceHarness.secret, expiresIn: Int64 = 3600, notBefore: Int64? = nil,
        extra: [(String, JSON)] = []
    ) throws -> String {
        let now = clock.nowSeconds
        var claims: [(Key, JSON)] = [("exp", .int(now + expiresIn)), ("iat", .int(now))]
        if let subject { claims.append(("sub", .string(subject))) }
        if let notBefore { claims.append(("nbf", .int(notBefore))) }
        claims += extra.map { (Key($0.0), $0.1) }
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        return String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(Array(JSON.object(JSONObject(claims)).description.utf8)), as: UTF8.self)
    }

    struct Reply {
        var status: Int
        var headers: [String: String]
        var body: String
        var json: JSON? { try? JSONParser.parse(body) }
    }

    /// Sends a request; `token` nil sends no Authorization header.
    func send(
        _ method: HTTPMethod, _ path: String, body: String? = nil, token: String?, contentType: String? = "application/json",
        authorization: String? = nil
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let authorization { request.headers.add(name: "Authorization", value: authorization) }
        if let body {
            if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await client.execute(request, timeout: .seconds(90))
        let collected = try await response.body.collect(upTo: 1 << 22)
        var headers: [String: String] = [:]
        for header in response.headers { headers[header.name.lowercased()] = header.value }
        return Reply(status: Int(response.status.code), headers: headers, body: String(buffer: collected))
    }
}
