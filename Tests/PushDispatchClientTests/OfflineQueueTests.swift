import Foundation
import PushCore
import PushJSON
import PushTestSupport
import Synchronization
import Testing

@testable import PushDispatchClient

/// The offline queue's pure parts: merging, back-off, what each failure means, and its file.
@Suite("The offline queue: merging, back-off, failures, its file")
struct OfflineQueueTests {
    static let phone = try! DeviceToken.fcm("phone")
    static let tablet = try! DeviceToken.fcm("tablet")
    static let newPhone = try! DeviceToken.fcm("new-phone")
    static let other = try! DeviceToken.fcm("other")
    static let options = JSONObject([(Key("mode"), .string("value")), (Key("format"), .string("v2"))])

    static func op(_ id: String, _ action: PendingOperation.Action, attempts: Int = 0, uid: String? = "alice") -> PendingOperation {
        PendingOperation(id: id, uid: uid, action: action, attempts: attempts)
    }
    static func subscribe(_ path: String, _ device: DeviceToken = phone) -> PendingOperation.Action {
        .subscribe(target: .device(device), path: path, options: options, allowsUpdate: true)
    }
    static func unsubscribe(_ path: String, _ device: DeviceToken = phone) -> PendingOperation.Action {
        .unsubscribe(target: .device(device), path: path)
    }

    struct MergeCase: CustomTestStringConvertible, Sendable {
        var name: String
        var queue: [PendingOperation]
        var new: PendingOperation
        var sending: String? = nil
        /// The ids left, in order, and what each's action now is (by the queue's ids).
        var expected: [PendingOperation]
        var withdrawn: [String] = []
        var forwarded: [OperationMerging.Outcome.Forward] = []
        var testDescription: String { name }
    }

    static func absorbing(_ operation: PendingOperation) -> PendingOperation {
        var merged = operation
        merged.absorbed = true
        return merged
    }
    static func update(_ from: [DeviceToken], _ to: DeviceToken) -> PendingOperation.Action {
        .updateDeviceToken(from: from, to: to)
    }

    static let mergeCases: [MergeCase] = [
        MergeCase(
            name: "subscribe, then subscribe of the same node: the later replaces the earlier",
            queue: [op("1", subscribe("/a")), op("2", subscribe("/b"))], new: op("3", subscribe("/a")),
            expected: [op("2", subscribe("/b")), absorbing(op("3", subscribe("/a")))], forwarded: [.init(from: "1", to: "3")]),
        MergeCase(
            name: "a replaced subscribe that may have reached the service passes its attempts on",
            queue: [op("1", subscribe("/a"), attempts: 2)], new: op("3", subscribe("/a")),
            expected: [absorbing(op("3", subscribe("/a"), attempts: 2))], forwarded: [.init(from: "1", to: "3")]),
        MergeCase(
            name: "a later subscribe that may not update (allowsUpdate false) would get 409 after the earlier: both kept",
            queue: [op("1", subscribe("/a"))],
            new: op("2", .subscribe(target: .device(phone), path: "/a", options: options, allowsUpdate: false)),
            expected: [op("1", subscribe("/a")), op("2", .subscribe(target: .device(phone), path: "/a", options: options, allowsUpdate: false))]),
        MergeCase(
            name: "subscribe never sent, then unsubscribe: the subscribe is withdrawn, the unsubscribe kept",
            queue: [op("1", subscribe("/a"))], new: op("2", unsubscribe("/a")),
            expected: [absorbing(op("2", unsubscribe("/a")))], withdrawn: ["1"]),
        MergeCase(
            name: "a subscribe that may have reached the service is not withdrawn by an unsubscribe: both are sent",
            queue: [op("1", subscribe("/a"), attempts: 1)], new: op("2", unsubscribe("/a")),
            expected: [op("1", subscribe("/a"), attempts: 1), op("2", unsubscribe("/a"))]),
        MergeCase(
            name: "unsubscribe, subscribe, unsubscribe: one unsubscribe",
            queue: [op("1", unsubscribe("/a")), op("2", subscribe("/a"))], new: op("3", unsubscribe("/a")),
            expected: [absorbing(op("3", unsubscribe("/a")))], withdrawn: ["2"], forwarded: [.init(from: "1", to: "3")]),
        MergeCase(
            name: "unsubscribe, then subscribe: both are sent, in order",
            queue: [op("1", unsubscribe("/a"))], new: op("2", subscribe("/a")),
            expected: [op("1", unsubscribe("/a")), op("2", subscribe("/a"))]),
        MergeCase(
            name: "the operation on the network is never touched",
            queue: [op("1", subscribe("/a"), attempts: 1)], new: op("2", subscribe("/a")), sending: "1",
            expected: [op("1", subscribe("/a"), attempts: 1), op("2", subscribe("/a"))]),
        MergeCase(
            name: "another device, another node, another webhook context, another user: no merge",
            queue: [
                op("1", subscribe("/a", tablet)), op("2", subscribe("/b")),
                op("3", .subscribe(target: .webhook(name: "w", context: "x"), path: "/a", options: options, allowsUpdate: true)),
                op("4", subscribe("/a"), uid: "bob"),
            ],
            new: op("5", unsubscribe("/a")),
            expected: [
                op("1", subscribe("/a", tablet)), op("2", subscribe("/b")),
                op("3", .subscribe(target: .webhook(name: "w", context: "x"), path: "/a", options: options, allowsUpdate: true)),
                op("4", subscribe("/a"), uid: "bob"), op("5", unsubscribe("/a")),
            ]),
        MergeCase(
            name: "an operation whose user is not known yet merges with the user's",
            queue: [op("1", subscribe("/a"), uid: nil)], new: op("2", subscribe("/a")),
            expected: [absorbing(op("2", subscribe("/a")))], forwarded: [.init(from: "1", to: "2")]),
        MergeCase(
            name: "a later subscribe whose fixed expiration is sooner could be refused where the earlier would not: both kept",
            queue: [op("1", .subscribe(target: .device(phone), path: "/a", options: JSONObject([(Key("expirationTimestampSeconds"), .int(2_000))]), allowsUpdate: true))],
            new: op("2", .subscribe(target: .device(phone), path: "/a", options: JSONObject([(Key("expirationTimestampSeconds"), .int(1_000))]), allowsUpdate: true)),
            expected: [
                op("1", .subscribe(target: .device(phone), path: "/a", options: JSONObject([(Key("expirationTimestampSeconds"), .int(2_000))]), allowsUpdate: true)),
                op("2", .subscribe(target: .device(phone), path: "/a", options: JSONObject([(Key("expirationTimestampSeconds"), .int(1_000))]), allowsUpdate: true)),
            ]),
        MergeCase(
            name: "a later subscribe with the default lifetime replaces one with a fixed expiration",
            queue: [op("1", .subscribe(target: .device(phone), path: "/a", options: JSONObject([(Key("expirationTimestampSeconds"), .int(2_000))]), allowsUpdate: true))],
            new: op("2", subscribe("/a")), expected: [absorbing(op("2", subscribe("/a")))], forwarded: [.init(from: "1", to: "2")]),
        MergeCase(
            name: "a refresh to a sooner date after one to a later date: both kept",
            queue: [op("1", .refresh(id: "s1", path: "/a", until: 20))], new: op("2", .refresh(id: "s1", path: "/a", until: 10)),
            expected: [op("1", .refresh(id: "s1", path: "/a", until: 20)), op("2", .refresh(id: "s1", path: "/a", until: 10))]),
        MergeCase(
            name: "an unsubscribe-all of the device in between stops merging",
            queue: [op("1", subscribe("/a")), op("2", .unsubscribeAll(device: phone))], new: op("3", subscribe("/a")),
            expected: [op("1", subscribe("/a")), op("2", .unsubscribeAll(device: phone)), op("3", subscribe("/a"))]),
        MergeCase(
            name: "a token update naming the device in between stops merging",
            queue: [op("1", subscribe("/a")), op("2", update([phone], newPhone))], new: op("3", unsubscribe("/a")),
            expected: [op("1", subscribe("/a")), op("2", update([phone], newPhone)), op("3", unsubscribe("/a"))]),
        MergeCase(
            name: "refresh never sent, then cancel: the refresh withdrawn",
            queue: [op("1", .refresh(id: "s1", path: "/a", until: 10)), op("2", .refresh(id: "s2", path: "/b", until: nil))],
            new: op("3", .cancel(id: "s2", path: "/b")),
            expected: [op("1", .refresh(id: "s1", path: "/a", until: 10)), absorbing(op("3", .cancel(id: "s2", path: "/b")))], withdrawn: ["2"]),
        MergeCase(
            name: "refresh after refresh",
            queue: [op("1", .refresh(id: "s1", path: "/a", until: 10))], new: op("2", .refresh(id: "s1", path: "/a", until: 20)),
            expected: [absorbing(op("2", .refresh(id: "s1", path: "/a", until: 20)))], forwarded: [.init(from: "1", to: "2")]),
        MergeCase(
            name: "unsubscribe-all withdraws the device's unsent subscribes and takes in its unsubscribes, not the tablet's nor a sent one",
            queue: [
                op("1", subscribe("/a")), op("2", unsubscribe("/b")), op("3", subscribe("/c", tablet)), op("4", .unsubscribeAll(device: phone)),
                op("6", subscribe("/d"), attempts: 1),
            ],
            new: op("5", .unsubscribeAll(device: phone)),
            expected: [op("3", subscribe("/c", tablet)), op("6", subscribe("/d"), attempts: 1), absorbing(op("5", .unsubscribeAll(device: phone)))],
            withdrawn: ["1"], forwarded: [.init(from: "2", to: "5"), .init(from: "4", to: "5")]),
        MergeCase(
            name: "a token update moves nothing queued: operations of the old token are sent before it, and it moves what they made",
            queue: [op("1", subscribe("/a")), op("2", unsubscribe("/b")), op("3", subscribe("/c", tablet))],
            new: op("4", update([phone], newPhone)),
            expected: [op("1", subscribe("/a")), op("2", unsubscribe("/b")), op("3", subscribe("/c", tablet)), op("4", update([phone], newPhone))]),
        MergeCase(
            name: "two token updates send the last: tablet → phone, then phone → new phone is tablet and phone → new phone, after what was between",
            queue: [
                op("1", update([tablet], phone)), op("2", subscribe("/a", other)),
                op("5", .subscribe(target: .webhook(name: "w", context: "x"), path: "/w", options: options, allowsUpdate: true)),
            ],
            new: op("3", update([phone], newPhone)),
            expected: [
                op("2", subscribe("/a", other)),
                op("5", .subscribe(target: .webhook(name: "w", context: "x"), path: "/w", options: options, allowsUpdate: true)),
                absorbing(op("3", update([tablet, phone], newPhone))),
            ],
            forwarded: [.init(from: "1", to: "3")]),
        MergeCase(
            name: "a subscribe of the middle token between two updates keeps them apart (merged, the move after it would overwrite it)",
            queue: [op("1", update([tablet], phone)), op("2", subscribe("/a"))], new: op("3", update([phone], newPhone)),
            expected: [op("1", update([tablet], phone)), op("2", subscribe("/a")), op("3", update([phone], newPhone))]),
        MergeCase(
            name: "an update to the same token twice is not merged into an update from no token",
            queue: [op("1", update([phone], phone))], new: op("2", update([phone], phone)),
            expected: [op("1", update([phone], phone)), op("2", update([phone], phone))]),
        MergeCase(
            name: "an unsubscribe-all merges back to a token update naming its device, not across it",
            queue: [op("1", unsubscribe("/a")), op("2", update([phone], newPhone)), op("3", update([newPhone], phone), attempts: 1), op("4", unsubscribe("/b"))],
            new: op("5", .unsubscribeAll(device: phone)),
            expected: [
                op("1", unsubscribe("/a")), op("2", update([phone], newPhone)), op("3", update([newPhone], phone), attempts: 1),
                absorbing(op("5", .unsubscribeAll(device: phone))),
            ],
            forwarded: [.init(from: "4", to: "5")]),
        MergeCase(
            name: "three token updates: one, from every token before",
            queue: [absorbing(op("3", update([tablet, phone], newPhone)))], new: op("4", update([newPhone], tablet)),
            expected: [absorbing(op("4", update([phone, newPhone], tablet)))], forwarded: [.init(from: "3", to: "4")]),
        MergeCase(
            name: "an unsubscribe of the middle token between two updates keeps them apart (merged, the removal would come before the move)",
            queue: [op("1", update([tablet], phone)), op("2", unsubscribe("/a"))], new: op("3", update([phone], newPhone)),
            expected: [op("1", update([tablet], phone)), op("2", unsubscribe("/a")), op("3", update([phone], newPhone))]),
        MergeCase(
            name: "a subscribe of the first token between two updates keeps them apart (merged, it would move too)",
            queue: [op("1", update([tablet], phone)), op("2", subscribe("/a", tablet))], new: op("3", update([phone], newPhone)),
            expected: [op("1", update([tablet], phone)), op("2", subscribe("/a", tablet)), op("3", update([phone], newPhone))]),
        MergeCase(
            name: "an update that may have reached the service is not merged",
            queue: [op("1", update([tablet], phone), attempts: 1)], new: op("3", update([phone], newPhone)),
            expected: [op("1", update([tablet], phone), attempts: 1), op("3", update([phone], newPhone))]),
    ]

    @Test("operations that cancel or repeat each other are merged", arguments: mergeCases)
    func merging(_ test: MergeCase) {
        let outcome = OperationMerging.enqueue(test.new, into: test.queue, sending: test.sending)
        #expect(outcome.queue == test.expected)
        #expect(outcome.withdrawn == test.withdrawn)
        #expect(outcome.forwarded == test.forwarded)
    }

    @Test("back-off: doubles from the initial delay to the cap, jittered between its half and its whole")
    func backOff() {
        let table: [(failures: Int, random: Double, milliseconds: Int64)] = [
            (0, 0.5, 0), (1, 0, 500), (1, 0.999_999, 1000), (2, 0, 1000), (3, 1, 4000), (9, 1, 256_000), (10, 1, 300_000), (10, 0, 150_000),
            (1_000_000, 1, 300_000), (Int.max, 0.5, 225_000), (3, -5, 2000), (3, 7, 4000),
        ]
        for row in table {
            let delay = RetryDelay.delay(failures: row.failures, initial: .seconds(1), maximum: .seconds(300), random: row.random)
            #expect(delay == .milliseconds(row.milliseconds), "\(row)")
        }
        #expect(RetryDelay.delay(failures: 5, initial: .zero, maximum: .zero, random: 1) == .milliseconds(1))
        #expect(RetryDelay.delay(failures: 40, initial: .seconds(Int64.max), maximum: .seconds(Int64.max), random: 1) == .seconds(86_400))
    }

    @Test("what each failure means: retry, suspend the queue, or refuse the operation; and whether it may have been applied")
    func dispositions() {
        let table: [(PushClientError.Code, OperationExecutor.Disposition)] = [
            (.transport, .retry), (.unavailable, .retry), (.internalError, .retry), (.invalidResponse, .retry),
            (.unauthorized, .suspend), (.credentials, .retry),
            (.permissionDenied, .refuse), (.forbidden, .refuse), (.badRequest, .refuse), (.conflict, .refuse), (.notFound, .refuse),
            (.tooManySubscriptions, .refuse), (.payloadTooLarge, .refuse), (.partialUpdate, .refuse), (.userChanged, .refuse),
            (PushClientError.Code("something_new"), .refuse),
        ]
        for (code, disposition) in table {
            #expect(OperationExecutor.disposition(of: PushClientError(code, "")) == disposition, "\(code)")
        }
        // Any 5xx or 408, whatever the body (the service's own request_timeout, a gateway's
        // {"error":"Service Unavailable"}), and a proxy's bare 429 wait; the service's 429 refuses.
        for status in [408, 429, 500, 502, 503, 504] {
            #expect(OperationExecutor.disposition(of: HTTPAnswer(status: status, contentLocation: nil, body: Array("<html>".utf8)).error) == .retry)
        }
        let timeout = HTTPAnswer(status: 408, contentLocation: nil, body: Array(#"{"error":"request_timeout","message":"30 s"}"#.utf8)).error
        #expect(OperationExecutor.disposition(of: timeout) == .retry)
        let gateway = HTTPAnswer(status: 503, contentLocation: nil, body: Array(#"{"status":503,"error":"Service Unavailable"}"#.utf8)).error
        #expect(OperationExecutor.disposition(of: gateway) == .retry)
        let service429 = HTTPAnswer(status: 429, contentLocation: nil, body: Array(#"{"error":"too_many_subscriptions","message":"12"}"#.utf8)).error
        #expect(OperationExecutor.disposition(of: service429) == .refuse)
        var refused = PushClientError(.transport, "connection refused")
        #expect(OperationExecutor.mayHaveApplied(refused))
        refused.neverSent = true
        #expect(!OperationExecutor.mayHaveApplied(refused))
        #expect(!OperationExecutor.mayHaveApplied(PushClientError(.unauthorized, "")))
        #expect(OperationExecutor.mayHaveApplied(PushClientError(.unavailable, "")))
    }

    static let everyKind: [PendingOperation] = [
        op("00000000000000a1", subscribe("/rooms/lobby")),
        op("00000000000000a2", .subscribe(target: .webhook(name: "orders", context: "crm"), path: "/a", options: JSONObject([(Key("mode"), .string("noData")), (Key("expirationTimestampSeconds"), .int(1_900_000_000))]), allowsUpdate: false), attempts: 3, uid: nil),
        op("00000000000000a3", unsubscribe("/rooms/lobby", try! .apns(hex: "0a0b0c0d0e0f1011"))),
        op("00000000000000a4", .refresh(id: "0123456789abcdef", path: "/a/b", until: 1_900_000_000)),
        op("00000000000000a5", .refresh(id: "0123456789abcdef", path: "/a/b", until: nil)),
        op("00000000000000a6", .cancel(id: "0123456789abcdef", path: "/")),
        op("00000000000000a7", .unsubscribeAll(device: try! .webPush(subscriptionJSON: #"{"endpoint":"https://push.example.com/x","keys":{"p256dh":"BPk","auth":"abc"}}"#))),
        op("00000000000000a8", .updateDeviceToken(from: [try! .hms("h1"), try! .fcm("f1")], to: try! .harmonyOS("h2"))),
        absorbing(op("00000000000000a9", .unsubscribeAll(device: phone))),
    ]

    @Test("the file round-trips every kind of operation; it never holds a bearer token")
    func roundTrip() throws {
        let bytes = QueueDocument.encode(app: "toto", operations: Self.everyKind)
        #expect(try QueueDocument.decode(bytes, app: "toto") == Self.everyKind)
        #expect(try QueueDocument.decode(QueueDocument.encode(app: "toto", operations: []), app: "toto").isEmpty)
        #expect(!String(decoding: bytes, as: UTF8.self).contains("Bearer"))
    }

    @Test("a file that is not a queue of this application is refused, saying what and where")
    func refusedFiles() {
        let table: [(String, String)] = [
            ("", "not JSON"),
            ("[]", "the file: expected an object"),
            (#"{"pushdispatchQueue":2,"app":"toto","operations":[]}"#, "another version"),
            (#"{"pushdispatchQueue":1,"app":"other","operations":[]}"#, "application \"other\", not of \"toto\""),
            (#"{"pushdispatchQueue":1,"app":"toto","operations":[],"extra":1}"#, "unexpected member \"extra\""),
            (#"{"pushdispatchQueue":1,"app":"toto","operations":[{"id":"zz","attempts":0,"op":"cancel"}]}"#, "operations[0]: \"id\" is not 16"),
            (#"{"pushdispatchQueue":1,"app":"toto","operations":[{"id":"00000000000000a1","attempts":-1,"op":"cancel"}]}"#, "\"attempts\" is not an integer"),
            (#"{"pushdispatchQueue":1,"app":"toto","operations":[{"id":"00000000000000a1","attempts":0,"op":"explode"}]}"#, "\"op\" \"explode\" is not an operation"),
            (#"{"pushdispatchQueue":1,"app":"toto","operations":[{"id":"00000000000000a1","attempts":0,"op":"cancel","subscription":"x","path":"/a/"}]}"#, "not a canonical path"),
            (#"{"pushdispatchQueue":1,"app":"toto","operations":[{"id":"00000000000000a1","attempts":0,"op":"unsubscribe","target":{"kind":"apns","context":"xyz"},"path":"/a"}]}"#, "operations[0] (00000000000000a1).target:"),
            (#"{"pushdispatchQueue":1,"app":"toto","operations":[{"id":"00000000000000a1","attempts":0,"op":"unsubscribeAll","device":{"kind":"webhook","context":"x"}}]}"#, "not a kind of device"),
            (#"{"pushdispatchQueue":1,"app":"toto","operations":[{"id":"00000000000000a1","attempts":0,"op":"subscribe","target":{"kind":"mobile","context":"t"},"path":"/a","options":{"mode":"loud"},"allowsUpdate":true}]}"#, "\"mode\" is not noData"),
            (#"{"pushdispatchQueue":1,"app":"toto","operations":[{"id":"00000000000000a1","attempts":0,"op":"subscribe","target":{"kind":"mobile","context":"t"},"path":"/a","options":{"headers":{}},"allowsUpdate":true}]}"#, "unexpected member \"headers\""),
        ]
        for (text, expected) in table {
            do {
                _ = try QueueDocument.decode(Array(text.utf8), app: "toto")
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.code == .queueStore && error.message.contains(expected), "\(error.message)")
            }
        }
        let twice = QueueDocument.encode(app: "toto", operations: [Self.everyKind[0], Self.everyKind[0]])
        #expect(throws: PushClientError(.queueStore, "")) { try QueueDocument.decode(twice, app: "toto") }
    }

    @Test("damaged queue files are read or refused with queue_store, never a crash", arguments: [21, 22, 23] as [UInt64])
    func damagedFiles(seed: UInt64) throws {
        let valid = QueueDocument.encode(app: "toto", operations: Self.everyKind)
        let json = try JSONParser.parse(valid)
        var mutator = Mutator(seed: seed)
        var refused = 0
        for round in 0..<1_500 {
            let bytes = round.isMultiple(of: 2) ? mutator.mutateBytes(valid) : Array(mutator.mutateJSON(json).description.utf8)
            do {
                let operations = try QueueDocument.decode(bytes, app: "toto")
                // What is read is written back the same: nothing half-read.
                #expect(try QueueDocument.decode(QueueDocument.encode(app: "toto", operations: operations), app: "toto") == operations)
            } catch {
                refused += 1
                #expect(error.code == .queueStore && error.message.utf8.count <= 700)
            }
        }
        #expect(refused > 0)
    }
}

/// The queue's actor with a service that cannot be reached (nothing listens on its port): what
/// is kept, what the app sees, the bound, a withdrawal, an unreadable file.
@Suite("The offline queue while the service cannot be reached")
struct OfflineQueueUnreachableTests {
    static func service(store: any OperationQueueStore, limit: Int = 256, device: DeviceToken? = OfflineQueueTests.phone) throws -> PushDispatch {
        try PushDispatch(
            .init(
                baseURL: URL(string: "http://127.0.0.1:9")!, app: "toto", credentials: { _ in Credentials(uid: "alice", token: "t") },
                deviceToken: device, keyStore: InMemoryDeviceKeyStore(), requestTimeout: .seconds(5),
                offlineQueue: OfflineQueueConfiguration(limit: limit, store: store, initialRetryDelay: .milliseconds(20), maxRetryDelay: .milliseconds(100))))
    }

    static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-queue-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// `operation`'s state once final, or as it is after 10 seconds (never a hang).
    static func finalState(_ operation: QueuedOperation) async throws -> QueuedOperation.State {
        for _ in 0..<1000 {
            let state = await operation.state()
            if state.isFinal { return state }
            try await Task.sleep(for: .milliseconds(10))
        }
        return await operation.state()
    }

    /// Waits until the queue has failed at least `failures` attempts' worth (its last error set).
    static func waitForFailure(_ queue: OfflineQueue) async throws {
        for _ in 0..<400 {
            if await queue.status().lastError != nil { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("the queue never failed an attempt")
    }

    @Test("an operation is kept in a 0600 file before the call returns, is retried, and is read again by a new service object")
    func keptAcrossRestarts() async throws {
        let file = try Self.folder().appendingPathComponent("queue.json")
        let store = FileOperationQueueStore(fileURL: file)
        let push = try Self.service(store: store)
        let operation = try await push.node(for: "/rooms//lobby").offline.subscribeThroughNotifications(descriptor: .init(mode: .value, encryption: .endToEnd()))
        #expect(operation.kind == .subscribe && operation.path == "/rooms/lobby")
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let stored = try QueueDocument.decode([UInt8](try Data(contentsOf: file)), app: "toto")
        #expect(stored.map(\.id) == [operation.id])
        guard case .subscribe(.device(OfflineQueueTests.phone), "/rooms/lobby", let options, true) = stored.first?.action,
            case .object(let encryption)? = options[Key("encryption")]
        else {
            Issue.record("not the subscribe queued: \(stored)")
            return
        }
        #expect(encryption[Key("jwk")] != nil && encryption[Key("alg")] == .string("ECDH-ES"))

        try await Self.waitForFailure(push.offline)
        let status = await push.offline.status()
        #expect(status.pending == 1 && status.lastError?.code == .transport && status.suspended == nil)
        // Nothing reached a service: the attempt is taken back, and the operation can still be withdrawn.
        guard case .pending(let attempts, _) = await operation.state() else { throw PushClientError(.invalidResponse, "not pending") }
        #expect(attempts == 0)

        // One queue per file: a second service object on it is refused, loudly, while this one
        // lives (a restart of the app, a new process, reads it: ClientLibraryOfflineTests).
        let second = try Self.service(store: store)
        do {
            _ = try await second.offline.operations()
            Issue.record("two queues on one file")
        } catch {
            #expect(error.code == .queueStore && error.message.contains("in use by another PushDispatch"), "\(error)")
        }
        await #expect(throws: PushClientError(.queueStore, "")) { try await second.offline.discardAll() }
        #expect(await second.offline.status().storeError?.code == .queueStore)
        #expect(try QueueDocument.decode([UInt8](try Data(contentsOf: file)), app: "toto").map(\.id) == [operation.id])
    }

    @Test("a queue ends with its PushDispatch: the file's lock is released and a new object reads what the old one queued")
    func endsWithItsService() async throws {
        let store = FileOperationQueueStore(fileURL: try Self.folder().appendingPathComponent("queue.json"))
        var id = ""
        do {
            let first = try Self.service(store: store)
            id = try await first.node(for: "/kept").offline.subscribeThroughNotifications().id
        }
        let next = try Self.service(store: store)
        var found: [QueuedOperation] = []
        for _ in 0..<200 {
            if let operations = try? await next.offline.operations() {
                found = operations
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(found.map(\.id) == [id])
    }

    @Test("the bound: past the limit an operation is refused at once with queue_full; merged ones still fit")
    func bound() async throws {
        let push = try Self.service(store: InMemoryOperationQueueStore(), limit: 3)
        for path in ["/a", "/b", "/c"] { _ = try await push.node(for: path).offline.subscribeThroughNotifications() }
        await #expect(throws: PushClientError(.queueFull, "")) { try await push.node(for: "/d").offline.subscribeThroughNotifications() }
        #expect(try await push.offline.operations().map(\.path) == ["/a", "/b", "/c"])
        // Subscribing again to /b replaces its operation: the count stays 3.
        let again = try await push.node(for: "/b").offline.subscribeThroughNotifications(descriptor: .init(mode: .value))
        let operations = try await push.offline.operations()
        #expect(operations.count == 3 && operations.last == again)
        #expect(throws: PushClientError(.invalidArgument, "")) { try Self.service(store: InMemoryOperationQueueStore(), limit: 0) }
    }

    @Test("cancel withdraws an operation never sent: it ends cancelled, the file no longer holds it, the observers hear it")
    func withdraw() async throws {
        let file = try Self.folder().appendingPathComponent("queue.json")
        let push = try Self.service(store: FileOperationQueueStore(fileURL: file))
        let updates = await push.offline.updates()
        let operation = try await push.node(for: "/x").offline.subscribeThroughNotifications()
        try await Self.waitForFailure(push.offline)
        let withdrawn = await operation.cancel()
        let stateNow = await operation.state()
        #expect(withdrawn, "\(stateNow)")
        #expect(await operation.state() == .cancelled)
        if withdrawn { #expect(await operation.outcome() == .cancelled) }
        #expect(await !operation.cancel())
        #expect(try QueueDocument.decode([UInt8](try Data(contentsOf: file)), app: "toto").isEmpty)
        // (Bounded: a stream that never reports the end fails the test, never hangs it.)
        let collector = Task {
            var seen: [QueuedOperation.State] = []
            for await update in updates where update.operation == operation {
                seen.append(update.state)
                if update.state.isFinal { break }
            }
            return seen
        }
        let deadline = Task {
            try await Task.sleep(for: .seconds(10))
            collector.cancel()
        }
        let seen = await collector.value
        deadline.cancel()
        #expect(seen.first == .pending(attempts: 0, lastError: nil) && seen.last == .cancelled)
        // An operation that took others in cannot be withdrawn (the others with it), nor can a
        // handle merged into another.
        let subscribed = try await push.node(for: "/z").offline.subscribeThroughNotifications()
        let unsubscribed = try await push.node(for: "/z").offline.unsubscribeThroughNotifications()
        #expect(try await Self.finalState(subscribed) == .cancelled)
        #expect(await !unsubscribed.cancel())
        let twice = try await push.node(for: "/z2").offline.subscribeThroughNotifications()
        _ = try await push.node(for: "/z2").offline.subscribeThroughNotifications()
        #expect(await !twice.cancel())
        // The same token again moves nothing: confirmed at once, nothing queued.
        let waiting = try await push.offline.operations().count
        let same = try await push.offline.updateDeviceTokenInAllSubscriptions(OfflineQueueTests.phone)
        #expect(await same.state() == .confirmed(nil))
        #expect(try await push.offline.operations().count == waiting)
        // A token update cannot be withdrawn: the device token changed when it was queued.
        let update = try await push.offline.updateDeviceTokenInAllSubscriptions(OfflineQueueTests.newPhone)
        #expect(await !update.cancel())
        #expect(await push.deviceToken() == OfflineQueueTests.newPhone)
        // Subscribing then subscribing again: the first handle follows the second.
        let first = try await push.node(for: "/y").offline.subscribeThroughNotifications()
        let second = try await push.node(for: "/y").offline.subscribeThroughNotifications(descriptor: .init(mode: .value))
        try await push.offline.discardAll()
        #expect(try await Self.finalState(first) == .cancelled)
        #expect(await second.state() == .cancelled)
    }

    @Test("an operation is for the user its first attempt was for: under another user's credentials it ends user_changed, unsent")
    func userChanged() async throws {
        let uid = Mutex("alice")
        let push = try PushDispatch(
            .init(
                baseURL: URL(string: "http://127.0.0.1:9")!, app: "toto", credentials: { _ in Credentials(uid: uid.withLock { $0 }, token: "t") },
                deviceToken: OfflineQueueTests.phone, keyStore: InMemoryDeviceKeyStore(),
                offlineQueue: OfflineQueueConfiguration(store: InMemoryOperationQueueStore(), initialRetryDelay: .milliseconds(20), maxRetryDelay: .milliseconds(50))))
        let operation = try await push.node(for: "/a").offline.subscribeThroughNotifications()
        try await Self.waitForFailure(push.offline)
        uid.withLock { $0 = "bob" }
        await push.offline.networkAvailable()
        let end = ContinuousClock.now + .seconds(10)
        while !(await operation.state()).isFinal && ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(10)) }
        guard case .refused(let error) = await operation.state() else {
            Issue.record("not refused: \(await operation.state())")
            return
        }
        #expect(error.code == .userChanged && error.message.contains("\"alice\"") && error.message.contains("\"bob\""), "\(error)")
        // Queued now, with bob's credentials seen last: for bob.
        let next = try await push.node(for: "/b").offline.subscribeThroughNotifications()
        #expect(try await push.offline.operations() == [next])
    }

    @Test("an unreadable queue file stops the queue with queue_store, is not written over, and discardAll starts over")
    func unreadableFile() async throws {
        let file = try Self.folder().appendingPathComponent("queue.json")
        try Data("{not a queue".utf8).write(to: file)
        let push = try Self.service(store: FileOperationQueueStore(fileURL: file))
        await #expect(throws: PushClientError(.queueStore, "")) { try await push.offline.operations() }
        do {
            _ = try await push.node(for: "/a").offline.subscribeThroughNotifications()
            Issue.record("queued over an unreadable file")
        } catch {
            #expect(error.code == .queueStore && error.message.contains("not JSON"))
        }
        #expect(try Data(contentsOf: file) == Data("{not a queue".utf8))
        #expect(await push.offline.status().storeError?.code == .queueStore)
        try await push.offline.discardAll()
        _ = try await push.node(for: "/a").offline.subscribeThroughNotifications()
        #expect(try QueueDocument.decode([UInt8](try Data(contentsOf: file)), app: "toto").count == 1)
        // No device token yet: refused at once, as the direct call is.
        let deviceless = try Self.service(store: InMemoryOperationQueueStore(), device: nil)
        await #expect(throws: PushClientError(.invalidArgument, "")) { try await deviceless.node(for: "/a").offline.subscribeThroughNotifications() }
    }
}
