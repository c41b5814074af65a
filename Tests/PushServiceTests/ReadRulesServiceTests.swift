import Foundation
import Logging
import PushCore
import PushContracts
import PushStore
@testable import PushService
import PushTestSupport
import Testing

/// Read rules in the running service (SPEC §12): refused subscriptions, revocations after
/// writes, audits after a change of rules.
@Suite("Read rules in the running service", .processLevel, .serialized)
struct ReadRulesServiceTests {
    static let rules =
        #"{"rules": {"users": {"$uid": {".read": "auth.uid == $uid"}}, "rooms": {"$room": {".read": "root.child('members').child($room).hasChild(auth.uid)"}}}}"#
    static let collection = "/datasync/v2/toto/subscriptions/"

    static func document(_ path: String, _ token: String) -> String {
        #"{"kind":"mobile","mode":"value","path":"\#(path)","context":"\#(token)","format":"v1"}"#
    }

    /// The outbox as (device token, payload).
    func outbox(_ service: ServiceHarness) async throws -> [(String, String)] {
        let store = try SQLiteStore(path: service.folder.appendingPathComponent("store.db").path)
        return try await store.notifications(limit: 1000).map { ($0.entry.target ?? "", String(decoding: $0.entry.payload, as: UTF8.self)) }
    }

    func eventually(_ condition: () async throws -> Bool) async throws -> Bool {
        for _ in 0..<3000 {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    @Test("alice cannot subscribe to bob's node (403 permission_denied), can to her own, and a refresh is checked too")
    func ownSubtree() async throws {
        let service = try ServiceHarness(rules: Self.rules)
        try await service.start()
        let alice = try service.token(subject: "alice")
        let bobs = try await service.send(.POST, Self.collection + "alice", body: Self.document("/users/bob", "fcm-alice"), token: alice)
        #expect(bobs.status == 403 && bobs.json?["error"] == "permission_denied")
        #expect(bobs.json?["message"]?.stringValue?.contains("/users/bob") == true)
        let own = try await service.send(.POST, Self.collection + "alice", body: Self.document("/users/alice/inbox", "fcm-alice"), token: alice)
        #expect(own.status == 201)
        // A node nobody's rules grant: the root.
        #expect(try await service.send(.POST, Self.collection + "alice", body: Self.document("/", "fcm-alice"), token: alice).status == 403)
        let id = try #require(own.json?["id"]?.stringValue)
        #expect(try await service.send(.PUT, Self.collection + "alice/" + id, body: "{}", token: alice).status == 200)
        await service.shutdown()
    }

    /// Where the membership test runs: the store, and how many instances share it.
    enum Deployment: String, CustomTestStringConvertible, CaseIterable {
        case sqlite, postgresSingle, postgresShared
        var testDescription: String {
            switch self {
            case .sqlite: "SQLite"
            case .postgresSingle: "PostgreSQL, a single instance"
            case .postgresShared: "PostgreSQL, two shared instances (records into one, the API on the other)"
            }
        }
        /// The PostgreSQL deployments are left out where no PostgreSQL server can run.
        static var available: [Deployment] { PostgresTestServer.enabled ? allCases : [.sqlite] }
    }

    /// The running services of a deployment: `records` reads the queue file, `api` answers
    /// the REST requests (two instances when shared), `store` reads what they committed.
    struct Running {
        let records: ServiceHarness
        let api: ServiceHarness
        let store: any IngestStore
        let cluster: (any ClusterStore)?
        let instance: String?

        /// Whether every record up to `seq` is processed (not only taken in).
        func processed(seq: Int64) async throws -> Bool {
            let source = instance.map { "\($0)/queue-file" } ?? "queue-file"
            guard try await store.checkpoints().first(where: { $0.source == source })?.lastSeq == seq else { return false }
            return try await cluster?.inboxDepth() ?? 0 == 0
        }

        func outbox() async throws -> [(String, String)] {
            try await store.notifications(limit: 1000).map { ($0.entry.target ?? "", String(decoding: $0.entry.payload, as: UTF8.self)) }
        }

        func shutdown() async {
            if api !== records { await api.shutdown() }
            await records.shutdown()
            (store as? PostgresStore)?.close()
        }
    }

    func start(_ deployment: Deployment) async throws -> Running {
        switch deployment {
        case .sqlite:
            let service = try ServiceHarness(ingest: true, rules: Self.rules)
            try await service.start()
            return Running(
                records: service, api: service, store: try SQLiteStore(path: service.folder.appendingPathComponent("store.db").path), cluster: nil,
                instance: nil)
        case .postgresSingle:
            let url = try PostgresTestServer.shared.get().createDatabase()
            let service = try ServiceHarness(ingest: true, store: "{postgres: \"\(url)\"}", instance: "{mode: single, name: node-1}", rules: Self.rules)
            try await service.start()
            let store = try await PostgresStore.open(url: url, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
            return Running(records: service, api: service, store: store, cluster: nil, instance: "node-1")
        case .postgresShared:
            let url = try PostgresTestServer.shared.get().createDatabase()
            let first = try ServiceHarness(ingest: true, store: "{postgres: \"\(url)\"}", instance: "{mode: shared, name: node-a}", rules: Self.rules)
            try await first.start()
            let second = try ServiceHarness(store: "{postgres: \"\(url)\"}", instance: "{mode: shared, name: node-b}", rules: Self.rules)
            try await second.start()
            let store = try await PostgresStore.open(url: url, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
            return Running(records: first, api: second, store: store, cluster: store, instance: "node-a")
        }
    }

    @Test(
        "a member subscribes to her room; removing her from the members revokes her subscription, and nothing of the room reaches her after",
        arguments: Deployment.available)
    func membership(_ deployment: Deployment) async throws {
        let running = try await start(deployment)
        let service = running.api
        try running.records.appendToQueueFile([#"{"seq":1,"app":"toto","op":"put","path":"/","data":{"members":{"r1":{"alice":true,"bob":true}},"rooms":{"r1":{"title":"Lunch"}}}}"#])
        #expect(try await eventually { try await running.processed(seq: 1) })
        let alice = try service.token(subject: "alice")
        let bob = try service.token(subject: "bob")
        let carol = try service.token(subject: "carol")
        #expect(try await service.send(.POST, Self.collection + "alice", body: Self.document("/rooms/r1", "fcm-alice"), token: alice).status == 201)
        #expect(try await service.send(.POST, Self.collection + "bob", body: Self.document("/rooms/r1", "fcm-bob"), token: bob).status == 201)
        #expect(try await service.send(.POST, Self.collection + "carol", body: Self.document("/rooms/r1", "fcm-carol"), token: carol).status == 403)
        try running.records.appendToQueueFile([
            #"{"seq":2,"app":"toto","op":"put","path":"/members/r1/alice","data":null}"#,
            #"{"seq":3,"app":"toto","op":"put","path":"/rooms/r1/title","data":"Secret plans"}"#,
        ])
        #expect(try await eventually { try await running.processed(seq: 3) })
        let sent = try await running.outbox()
        let toAlice = sent.filter { $0.0 == "fcm-alice" }.map(\.1)
        #expect(toAlice == [#"{"t":"revoke","r":"permission_denied","app":"toto","sp":"/rooms/r1"}"#])
        #expect(sent.filter { $0.0 == "fcm-bob" }.map(\.1) == [#"{"s":"OK","t":"value","app":"toto","sp":"/rooms/r1","d":"{\"title\":\"Secret plans\"}"}"#])
        // Her subscription is gone; her new subscription is refused. (An instance that does not
        // hold the application reads its tree from the store at most once a second.)
        service.clock.advance(by: .seconds(2))
        #expect(try await service.send(.GET, Self.collection + "alice", token: alice).json?.arrayValue?.isEmpty == true)
        #expect(try await service.send(.POST, Self.collection + "alice", body: Self.document("/rooms/r1", "fcm-alice"), token: alice).status == 403)
        await running.shutdown()
    }

    @Test("rules changed between two runs: the subscriptions they no longer allow are revoked at start")
    func changedRules() async throws {
        let service = try ServiceHarness(ingest: true, rules: #"{"rules": {".read": true}}"#)
        try await service.start()
        let alice = try service.token(subject: "alice")
        #expect(try await service.send(.POST, Self.collection + "alice", body: Self.document("/users/bob", "fcm-alice"), token: alice).status == 201)
        #expect(try await service.send(.POST, Self.collection + "alice", body: Self.document("/users/alice", "fcm-alice"), token: alice).status == 201)
        await service.stop()
        try service.setRules(Self.rules)
        try await service.start()
        #expect(try await eventually { try await outbox(service).count == 1 })
        #expect(try await outbox(service).map(\.1) == [#"{"t":"revoke","r":"permission_denied","app":"toto","sp":"/users/bob"}"#])
        let left = try await service.send(.GET, Self.collection + "alice", token: alice).json?.arrayValue ?? []
        #expect(left.map { $0["path"] } == ["/users/alice"])
        await service.shutdown()
    }

    @Test("a rule that does not parse stops the start, naming the rule and the column")
    func badRules() async throws {
        let service = try ServiceHarness(rules: #"{"rules": {"a": {".read": "data.val().matches('x')"}}}"#)
        do {
            try await service.start()
            Issue.record("the service started with a rule it cannot evaluate")
        } catch let error as ConfigurationError {
            #expect(error.description.contains("apps.toto.rules: rules/a/.read, column 12: matches() is not supported"))
        }
        await service.shutdown()
    }
}
