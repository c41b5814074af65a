import Foundation
import PushCore
import PushDispatchClient
import PushJSON
import PushTestSupport
import Synchronization
import Testing

/// The app library's offline queue against `pushdispatch run`: operations queued while the
/// service is down, kept across a restart of the app (a new process reading the same file),
/// sent once it is up; a token that expired meanwhile; a withdrawal that sends nothing; the bound.
@Suite("The app library's offline queue against pushdispatch run", .processLevel, .serialized)
struct ClientLibraryOfflineTests {
    static let queueTuning = OfflineQueueConfiguration(initialRetryDelay: .milliseconds(100), maxRetryDelay: .milliseconds(500))

    /// Waits until `operation` is final (or `seconds` pass) and returns its state.
    static func outcome(_ operation: QueuedOperation, within seconds: Double = 30) async throws -> QueuedOperation.State {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            let state = await operation.state()
            if state.isFinal { return state }
            try await Task.sleep(for: .milliseconds(20))
        }
        return await operation.state()
    }

    @Test("subscribe with the service stopped, restart the app, start the service: the subscription exists once and the next record reaches FCM")
    func acrossRestarts() async throws {
        let harness = try await ClientLibraryHarness.start(port: try HTTP2TestServer.freePort())
        defer { Task { await harness.stop() } }
        harness.stopService()
        let environment = ["PUSHDISPATCH_TOKEN": try ClientLibraryHarness.token("alice")]
        let queueFile = harness.folder.appendingPathComponent("app/queue.json").path
        let common = [
            "--url", "http://127.0.0.1:\(harness.port)", "--app", "toto", "--uid", "alice", "--device", "fcm:offline-phone",
            "--key-file", harness.folder.appendingPathComponent("app/device-key.json").path, "--queue-file", queueFile,
        ]
        let sample = ClientLibrarySampleTests.sample

        // The app queues a subscription (end to end encrypted) and exits: nothing can answer.
        let queued = try Executable.run(sample, ["subscribe"] + common + ["--path", "/offline/room", "--mode", "value", "--encrypt", "--offline"], environment: environment)
        #expect(queued.status == 0, "\(queued.stdout)\(queued.stderr)")
        let lines = queued.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines[0].hasPrefix("queued subscribe \"/offline/room\" [") && lines[1].contains(": pending ("), "\(queued.stdout)")
        let mode = try FileManager.default.attributesOfItem(atPath: queueFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        // Another launch, the service still down: the queue is read back, still waiting.
        let listed = try Executable.run(sample, ["queue"] + common, environment: environment)
        #expect(listed.status == 2 && listed.stdout.hasPrefix("subscribe \"/offline/room\" [") && listed.stdout.contains("queue: 1 pending"), "\(listed.stdout)\(listed.stderr)")

        // The service is back; a third launch sends what the first queued.
        try await harness.startService()
        let sent = try Executable.run(sample, ["queue"] + common + ["--wait", "30"], environment: environment)
        #expect(sent.status == 0 && sent.stdout.contains(": confirmed (subscription ") && sent.stdout.hasSuffix("queue: 0 pending\n"), "\(sent.stdout)\(sent.stderr)")
        // Once, however often the queue is read again.
        let again = try Executable.run(sample, ["queue"] + common + ["--wait", "2"], environment: environment)
        #expect(again.status == 0 && again.stdout == "queue: 0 pending\n", "\(again.stdout)\(again.stderr)")

        let push = try harness.client(device: try .fcm("offline-phone"))
        let subscriptions = try await push.subscriptions()
        #expect(subscriptions.count == 1 && subscriptions.first?.path == "/offline/room" && subscriptions.first?.mode == .value, "\(subscriptions)")

        // The next record's notification reaches the fake FCM, encrypted to the key the first launch made.
        try harness.write([("toto", "put", "/offline/room", #"{"topic":"back online"}"#)])
        let received = try await harness.fcmData("offline-phone", count: 1)
        #expect(received.count == 1)
        var line = JSONWriter()
        line.write(.object(JSONObject(received[0].map { (Key($0.key), JSON.string($0.value)) })))
        let read = try Executable.run(sample, ["read"] + common, input: line.string + "\n")
        #expect(read.stdout == "/offline/room value {\"topic\":\"back online\"} (OK, v2, endToEnd)\n", "\(read.stdout)\(read.stderr)")
    }

    @Test("a token that expired while the operation waited: the queue suspends after one fresh token is refused, and resumes when the credentials change")
    func expiredToken() async throws {
        let harness = try await ClientLibraryHarness.start(port: try HTTP2TestServer.freePort())
        defer { Task { await harness.stop() } }
        harness.stopService()
        // The user's token expired while the app had no network; the provider has only that one.
        let token = Mutex(try ClientLibraryHarness.token("alice", expiresIn: -120))
        let refreshes = Mutex(0)
        let push = try harness.client(
            device: try .fcm("expired-phone"),
            credentials: { forceRefresh in
                if forceRefresh { refreshes.withLock { $0 += 1 } }
                return Credentials(uid: "alice", token: token.withLock { $0 })
            },
            offlineQueue: Self.queueTuning)
        let operation = try await push.node(for: "/expired/room").offline.subscribeThroughNotifications(descriptor: .init(mode: .value))

        try await harness.startService()
        await push.offline.networkAvailable()
        try await ServiceEndToEndTests.eventually("a fresh token asked for", timeout: 30) { refreshes.withLock { $0 } >= 1 }
        var status = await push.offline.status()
        for _ in 0..<500 where status.suspended == nil {
            try await Task.sleep(for: .milliseconds(20))
            status = await push.offline.status()
        }
        #expect(status.suspended?.code == .unauthorized && status.pending == 1, "\(status)")
        guard case .pending(_, let lastError) = await operation.state() else {
            Issue.record("not pending: \(await operation.state())")
            return
        }
        #expect(lastError?.code == .unauthorized)
        // Suspended: no further attempt, no further request for a fresh token.
        try await Task.sleep(for: .seconds(1.5))
        #expect(refreshes.withLock { $0 } == 1)
        #expect(try await harness.client(device: nil).subscriptions().isEmpty)

        // The user signs in again; the app says so.
        token.withLock { $0 = try! ClientLibraryHarness.token("alice") }
        await push.offline.credentialsChanged()
        guard case .confirmed(let subscription?) = try await Self.outcome(operation) else {
            Issue.record("not confirmed: \(await operation.state())")
            return
        }
        #expect(subscription.path == "/expired/room")
        #expect(try await harness.client(device: nil).subscriptions().map(\.path) == ["/expired/room"])
        #expect(await push.offline.status().suspended == nil)
    }

    @Test("subscribe then cancel while offline sends nothing: no connection reaches the service; subscribe then unsubscribe sends the removal only")
    func cancelSendsNothing() async throws {
        let harness = try await ClientLibraryHarness.start()
        defer { Task { await harness.stop() } }
        // The app reaches the service through a proxy that is not there yet: its port refuses connections.
        let port = try HTTP2TestServer.freePort()
        let push = try harness.client(device: try .fcm("cancel-phone"), port: port, offlineQueue: Self.queueTuning)
        let operation = try await push.node(for: "/never/sent").offline.subscribeThroughNotifications()
        var status = await push.offline.status()
        for _ in 0..<500 where status.lastError == nil {
            try await Task.sleep(for: .milliseconds(10))
            status = await push.offline.status()
        }
        #expect(status.lastError?.code == .transport)
        // Never reached a service (the connection was refused): it can be withdrawn.
        #expect(await operation.cancel())
        #expect(await operation.state() == .cancelled)
        #expect(await push.offline.status().pending == 0)

        // The network is back: not one connection is made, since nothing is left to send.
        let proxy = try TCPProxy(routes: [.init("api", listen: "127.0.0.1:\(port)", target: "127.0.0.1:\(harness.port)")])
        await push.offline.networkAvailable()
        try await Task.sleep(for: .seconds(1.5))
        #expect(try Self.connections(proxy) == 0)
        proxy.stop()
        // Offline only once the proxy is gone: a connection it still accepted would make the
        // next attempt one that may have reached the service (and so not withdrawable).
        try await ServiceEndToEndTests.eventually("the proxy gone", timeout: 10) { httpStatus("http://127.0.0.1:\(port)/readyz", timeout: 1) == 0 }

        // Offline again. Subscribe then unsubscribe: the subscribe is withdrawn; the removal is
        // kept (the service might hold an older subscription), and sent once the network is back.
        let subscribe = try await push.node(for: "/merged/node").offline.subscribeThroughNotifications()
        let unsubscribe = try await push.node(for: "/merged/node").offline.unsubscribeThroughNotifications()
        // (The subscribe may be on the network, failing, as the unsubscribe is queued: the two
        // merge once that attempt ends.)
        #expect(try await Self.outcome(subscribe, within: 10) == .cancelled)
        #expect(try await push.offline.operations() == [unsubscribe])
        let back = try TCPProxy(routes: [.init("api", listen: "127.0.0.1:\(port)", target: "127.0.0.1:\(harness.port)")])
        defer { back.stop() }
        await push.offline.networkAvailable()
        #expect(try await Self.outcome(unsubscribe) == .confirmed(nil))
        #expect(try Self.connections(back) >= 1)
        #expect(try await harness.client(device: nil).subscriptions().isEmpty)
    }

    @Test("the bound: the operation past the limit is refused at once; a refusal of the read rules refuses that operation alone")
    func bound() async throws {
        let harness = try await ClientLibraryHarness.start(port: try HTTP2TestServer.freePort())
        defer { Task { await harness.stop() } }
        harness.stopService()
        var tuning = Self.queueTuning
        tuning.limit = 4
        let push = try harness.client(device: try .fcm("bound-phone"), offlineQueue: tuning)
        var operations: [QueuedOperation] = []
        for path in ["/bound/1", "/private/secret", "/bound/2", "/bound/3"] {
            operations.append(try await push.node(for: path).offline.subscribeThroughNotifications())
        }
        do {
            _ = try await push.node(for: "/bound/4").offline.subscribeThroughNotifications()
            Issue.record("a fifth operation was queued past the limit of 4")
        } catch {
            #expect(error.code == .queueFull && error.message.contains("4 operations"), "\(error)")
        }
        #expect(try await push.offline.operations() == operations)

        try await harness.startService()
        await push.offline.networkAvailable()
        var outcomes: [QueuedOperation.State] = []
        for operation in operations { outcomes.append(try await Self.outcome(operation)) }
        #expect(outcomes[1] == .refused(PushClientError(.permissionDenied, "")), "\(outcomes[1])")
        for index in [0, 2, 3] {
            guard case .confirmed(let subscription?) = outcomes[index] else {
                Issue.record("\(operations[index]): \(outcomes[index])")
                continue
            }
            #expect(subscription.path == operations[index].path)
        }
        #expect(try await harness.client(device: nil).subscriptions().map(\.path).sorted() == ["/bound/1", "/bound/2", "/bound/3"])
        // Room again: the next one is queued and sent.
        let fourth = try await push.node(for: "/bound/4").offline.subscribeThroughNotifications()
        guard case .confirmed = try await Self.outcome(fourth) else {
            Issue.record("not confirmed: \(await fourth.state())")
            return
        }
    }

    /// Connections the proxy relayed to the service so far.
    static func connections(_ proxy: TCPProxy) throws -> Int {
        guard case .object(let routes) = try JSONParser.parse(Array(try proxy.command("stats").utf8)),
            case .object(let api)? = routes[Key("api")], let count = api[Key("connections")]?.integerValue
        else { throw RunningService.ServiceError(message: "the proxy's stats have no connection count") }
        return Int(count)
    }
}
