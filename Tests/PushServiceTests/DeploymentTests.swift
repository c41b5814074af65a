import Foundation
import Logging
import PushCore
import PushContracts
@testable import PushService
import PushStore
import PushTestSupport
import Testing

/// The deployment is chosen once, from `store` and `instance.mode`, and a database is used one
/// way at a time: a single instance alone, or shared instances together.
@Suite("Deployments: one instance or several", .processLevel, .serialized)
struct DeploymentTests {
    static let logger = Logger(label: "deployment-test")

    func load(_ text: String) throws -> ServiceConfiguration {
        try ConfigurationLoader.load(text: text, baseDirectory: "/tmp", environment: [:])
    }

    struct Mode: Sendable, CustomTestStringConvertible {
        var configuration: String
        var expected: ServiceConfiguration.InstanceMode?
        /// What the refusal says, when refused.
        var problem: String?
        var testDescription: String { configuration }
    }

    @Test(
        "instance.mode: single on SQLite; shared by default on PostgreSQL, single on request; anything else refused with the key",
        arguments: [
            Mode(configuration: "store: {sqlite: ./a.db}", expected: .single),
            Mode(configuration: "store: {sqlite: ./a.db}\ninstance: {mode: single}", expected: .single),
            Mode(configuration: "store: {postgres: \"postgres://u@h:5432/d\"}", expected: .shared),
            Mode(configuration: "store: {postgres: \"postgres://u@h:5432/d\"}\ninstance: {mode: single}", expected: .single),
            Mode(configuration: "store: {postgres: \"postgres://u@h:5432/d\"}\ninstance: {mode: shared}", expected: .shared),
            Mode(configuration: "store: {sqlite: ./a.db}\ninstance: {mode: shared}", problem: "instance.mode: shared needs store.postgres"),
            Mode(configuration: "instance: {mode: cluster}", problem: "instance.mode: expected single (this process alone on its store) or shared"),
        ])
    func modes(_ mode: Mode) throws {
        do {
            let configuration = try load(mode.configuration)
            #expect(configuration.instanceMode == mode.expected)
            #expect(mode.problem == nil)
        } catch let error as ConfigurationError {
            let problem = try #require(mode.problem, "refused: \(error)")
            #expect(error.description.contains(problem), "\(error)")
        }
    }

    func postgres(_ url: String, mode: String) throws -> ServiceConfiguration {
        try load("store: {postgres: \"\(url)\"}\ninstance: {mode: \(mode), name: node-1}")
    }

    @Test(
        "on one PostgreSQL database, a single instance excludes any other; shared instances exclude a single one",
        .enabled(if: PostgresTestServer.enabled))
    func exclusion() async throws {
        let url = try PostgresTestServer.shared.get().createDatabase()
        let single = try await Deployments.open(try postgres(url, mode: "single"), logger: Self.logger)
        await #expect(throws: ConfigurationError.self) { _ = try await Deployments.open(try postgres(url, mode: "single"), logger: Self.logger) }
        do {
            _ = try await Deployments.open(try postgres(url, mode: "shared"), logger: Self.logger)
            Issue.record("a shared instance started beside a single one")
        } catch let error as ConfigurationError {
            #expect(error.description.contains("a single instance (instance.mode: single) uses"))
        }
        single.store.close()

        // The lock goes with the single instance's session (PostgreSQL ends it shortly after
        // close): shared ones start, side by side.
        var opened: (any Deployment)?
        let deadline = ContinuousClock.now + .seconds(15)
        while opened == nil {
            do {
                opened = try await Deployments.open(try postgres(url, mode: "shared"), logger: Self.logger)
            } catch let error as ConfigurationError where ContinuousClock.now < deadline {
                #expect(error.description.contains("a single instance (instance.mode: single) uses"))
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        let first = try #require(opened)
        let second = try await Deployments.open(try postgres(url, mode: "shared"), logger: Self.logger)
        do {
            _ = try await Deployments.open(try postgres(url, mode: "single"), logger: Self.logger)
            Issue.record("a single instance started beside shared ones")
        } catch let error as ConfigurationError {
            #expect(error.description.contains("instance.mode: single, but other pushdispatch instances use"))
            #expect(error.problems.map(\.kind) == [.inUse] && error.problems.first?.key == "instance.mode")
        }
        first.store.close()
        second.store.close()
    }

    @Test(
        "a single instance does not start over records that shared instances accepted and did not process",
        .enabled(if: PostgresTestServer.enabled))
    func waitingInbox() async throws {
        let url = try PostgresTestServer.shared.get().createDatabase()
        let store = try await PostgresStore.open(url: url, logger: Self.logger)
        let line = Array(#"{"seq":1,"app":"toto","op":"put","path":"/a","data":1}"#.utf8)
        try await store.enqueue([InboxRecord(app: "toto", source: "node-1/socket", position: 0, line: line)], checkpoints: [])
        store.close()
        do {
            _ = try await Deployments.open(try postgres(url, mode: "single"), logger: Self.logger)
            Issue.record("a single instance started over a waiting inbox")
        } catch let error as ConfigurationError {
            #expect(error.description.contains("1 records accepted by shared instances wait in the inbox"))
        }
    }

    @Test(
        "a single instance on PostgreSQL processes records itself (no inbox, no lease, no instance row) and files checkpoints under its name",
        .enabled(if: PostgresTestServer.enabled))
    func singleOnPostgres() async throws {
        let url = try PostgresTestServer.shared.get().createDatabase()
        let service = try ServiceHarness(ingest: true, store: "{postgres: \"\(url)\"}", instance: "{mode: single, name: node-1}")
        try await service.start()
        let document = #"{"kind":"mobile","mode":"value","path":"/users/alice","context":"fcm-alice","format":"v1"}"#
        #expect(try await service.send(.POST, "/datasync/v2/toto/subscriptions/u1", body: document, token: try service.token()).status == 201)
        try Data(#"{"seq":1,"app":"toto","op":"put","path":"/users/alice","data":{"name":"Alice"}}"#.utf8 + [10]).write(to: service.queueFile)
        let store = try await PostgresStore.open(url: url, logger: Self.logger)
        defer { store.close() }
        var queued: [StoredNotification] = []
        for _ in 0..<3_000 where queued.isEmpty {
            queued = try await store.notifications(limit: 10)
            if queued.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(queued.map { String(decoding: $0.entry.payload, as: UTF8.self) } == [
            #"{"s":"OK","t":"value","app":"toto","sp":"/users/alice","d":"{\"name\":\"Alice\"}"}"#
        ])
        #expect(try await store.leases().isEmpty)
        #expect(try await store.instances(within: 3_600_000).isEmpty)
        #expect(try await store.inboxDepth() == 0)
        // Filed under the instance's name, as shared instances file theirs.
        #expect(try await store.checkpoints().map(\.source) == ["node-1/queue-file"])
        await service.shutdown()
    }
}
