import Foundation
import PushFakes
import PushTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Three `pushdispatch run` processes, each on a host of its own, and PostgreSQL on the hub
/// (``TestNetwork``: namespaces joined by veth pairs), started as the README says (a config file
/// each, one database) with the applications, subscriptions and records of
/// ``MultiInstanceTests``, whose oracle decides.
///
/// One proxy process (``TCPProxy``) carries what crosses namespaces without crossing the links
/// under test: the fake providers (on this process's loopback) into each host, so that an
/// instance delivers whatever becomes of its link to PostgreSQL; and each instance's API out to
/// this process's loopback (``ports``). An instance started `proxied` reaches PostgreSQL through
/// the proxy too (its namespace → the proxy → its link → the hub): the faults of a bad link are
/// set on that route (`pg-n<i>`). The others connect over their link directly.
final class NetworkCluster: Sendable {
    struct Options {
        /// Instances (0-based) whose PostgreSQL connections go through the proxy.
        var proxied: Set<Int> = []
        /// Instances whose wall clock is off, by seconds (``ClockShift``).
        var clockShift: [Int: Int] = [:]
        /// How long the fake webhook takes to answer: deliveries are in flight.
        var webhookDelay: Duration = .milliseconds(200)
    }

    let network: TestNetwork
    let server: PostgresTestServer
    /// The database's name.
    let database: String
    let fakes: FakeProviders
    let proxy: TCPProxy
    let folders: [URL]
    let services: [RunningService]
    /// Each instance's API, on this process's loopback.
    let ports: [Int]
    let names = ["node-1", "node-2", "node-3"]

    /// Where each instance's API listens in its namespace, and the proxy's PostgreSQL route there.
    static let apiPort = 8080
    static let proxiedPostgresPort = 15432

    private init(
        network: TestNetwork, server: PostgresTestServer, database: String, fakes: FakeProviders, proxy: TCPProxy, folders: [URL],
        services: [RunningService], ports: [Int]
    ) {
        self.network = network
        self.server = server
        self.database = database
        self.fakes = fakes
        self.proxy = proxy
        self.folders = folders
        self.services = services
        self.ports = ports
    }

    /// Makes the network, starts PostgreSQL on the hub, the fakes, the proxy and the three
    /// instances, and waits until they are ready and share the applications two each. What was
    /// made is undone when a step fails.
    static func start(_ options: Options = Options()) async throws -> NetworkCluster {
        let network = try TestNetwork.make(hosts: 3)
        var server: PostgresTestServer?
        var fakes: FakeProviders?
        var proxy: TCPProxy?
        var services: [RunningService] = []
        do {
            server = try await onThread { try PostgresTestServer.startOwn(in: network.hub) }
            let database = String(try server!.createDatabase().split(separator: "/").last!)
            fakes = try await FakeProviders.start(tls: true, webhooks: ["orders": MultiInstanceTests.webhookSecret])
            fakes!.script("webhook:orders", Array(repeating: .slow(options.webhookDelay, then: .normal), count: 100_000))
            let fakePort = Int(fakes!.baseURL.split(separator: ":").last!)!
            var routes: [TCPProxy.Route] = []
            for (index, host) in network.hosts.enumerated() {
                routes.append(.init("fakes-\(host.name)", listen: "\(host.namespace)@127.0.0.1:\(fakePort)", target: "127.0.0.1:\(fakePort)"))
                routes.append(.init("api-\(host.name)", listen: "127.0.0.1:0", target: "\(host.namespace)@127.0.0.1:\(apiPort)"))
                if options.proxied.contains(index) {
                    routes.append(
                        .init(
                            "pg-\(host.name)", listen: "\(host.namespace)@127.0.0.1:\(proxiedPostgresPort)",
                            target: "\(host.namespace)@\(host.hubAddress):\(server!.port)"))
                }
            }
            let allRoutes = routes
            proxy = try await onThread { try TCPProxy(routes: allRoutes) }
            var folders: [URL] = []
            for (index, host) in network.hosts.enumerated() {
                let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-net-\(UUID().uuidString.prefix(8))-\(index + 1)")
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                let url =
                    options.proxied.contains(index)
                    ? "postgres://\(server!.user)@127.0.0.1:\(proxiedPostgresPort)/\(database)"
                    : "postgres://\(server!.user)@\(host.hubAddress):\(server!.port)/\(database)"
                try Data(MultiInstanceTests.config(folder, instance: "node-\(index + 1)", database: url, fakes: fakes!, port: apiPort).utf8)
                    .write(to: folder.appendingPathComponent("pushdispatch.yaml"))
                #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil))
                folders.append(folder)
                let environment = try options.clockShift[index].map { try ClockShift.environment(shiftedBy: $0) } ?? [:]
                services.append(
                    try RunningService(config: folder.appendingPathComponent("pushdispatch.yaml").path, namespace: host.namespace, environment: environment))
            }
            let ports = network.hosts.map { proxy!.ports["api-\($0.name)"]! }
            let cluster = NetworkCluster(
                network: network, server: server!, database: database, fakes: fakes!, proxy: proxy!, folders: folders, services: services, ports: ports)
            for port in ports {
                try await waitFor("ready", timeout: 60) { httpStatus("http://127.0.0.1:\(port)/readyz", timeout: 5) == 200 }
            }
            try await waitFor("every application owned, two per instance", timeout: 30) {
                let owners = try cluster.owners()
                return owners.count == 6 && Dictionary(grouping: owners.values, by: { $0 }).values.allSatisfy { $0.count == 2 }
            }
            return cluster
        } catch {
            for service in services where service.process.isRunning { kill(service.process.processIdentifier, SIGKILL) }
            proxy?.stop()
            server?.destroy()
            network.destroy()
            if let fakes { await fakes.stop() }
            throw error
        }
    }

    /// Starts a cluster, runs `body` with it, and ends it however `body` ends.
    static func run(_ options: Options = Options(), _ body: (NetworkCluster) async throws -> Void) async throws {
        let cluster = try await start(options)
        do {
            try await body(cluster)
        } catch {
            await cluster.stop()
            throw error
        }
        await cluster.stop()
    }

    /// Ends everything: the instances (SIGKILL: a test that ends has checked what it needed),
    /// the proxy, PostgreSQL, the namespaces, the fakes.
    func stop() async {
        for service in services where service.process.isRunning {
            kill(service.process.processIdentifier, SIGKILL)
            service.process.waitUntilExit()
        }
        proxy.stop()
        server.destroy()
        network.destroy()
        await fakes.stop()
    }

    /// One subscription per application, made through the instances `through` in turn, each read
    /// back through another: application → subscription id.
    func subscribe(through: [Int] = [0, 1, 2]) throws -> [String: String] {
        var subscriptions: [String: String] = [:]
        for (index, app) in MultiInstanceTests.apps.enumerated() {
            subscriptions[app] = try MultiInstanceTests.subscribe(ports[through[index % through.count]], app: app)
            let read = try RunCommandTests.curl([
                "http://127.0.0.1:\(ports[through[(index + 1) % through.count]])/datasync/v2/\(app)/subscriptions/alice/\(subscriptions[app]!)",
                "-H", "Authorization: Bearer \(try MultiInstanceTests.token(app))",
            ])
            #expect(read.status == 200)
        }
        return subscriptions
    }

    /// Records `range` of every application, each application's through the queue file of one of
    /// `into` (application i: `into[i % into.count]`).
    func feed(_ range: ClosedRange<Int>, into: [Int]) throws {
        var files: [Int: [String]] = [:]
        for n in range {
            for (index, app) in MultiInstanceTests.apps.enumerated() {
                files[into[index % into.count], default: []].append(MultiInstanceTests.record(app, n, index))
            }
        }
        for (file, lines) in files { try CrashTests.append(lines[...], to: folders[file]) }
    }

    /// Feeds `range` one record number every `interval` seconds, on a thread of its own.
    func feedSteadily(_ range: ClosedRange<Int>, into: [Int], every interval: TimeInterval) -> Feeding {
        let feeding = Feeding()
        Thread {
            for n in range {
                try? self.feed(n...n, into: into)
                Thread.sleep(forTimeInterval: interval)
            }
            feeding.done.store(true, ordering: .releasing)
        }.start()
        return feeding
    }

    /// A steady feed under way.
    final class Feeding: Sendable {
        let done = Atomic<Bool>(false)
        var isDone: Bool { done.load(ordering: .acquiring) }
    }

    func psql(_ sql: String) throws -> String {
        let result = try server.psql(database, sql)
        guard result.status == 0 else { throw RunningService.ServiceError(message: "psql \(sql): \(result.text)") }
        return result.text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Who holds which application now (live leases, by the database's clock).
    func owners() throws -> [String: String] {
        try MultiInstanceTests.owners(server, database)
    }

    /// The sum of the leases' fencing tokens: it grows by one at each takeover.
    func tokens() throws -> Int {
        Int(try psql("SELECT coalesce(sum(token), 0) FROM app_lease")) ?? -1
    }

    /// The `seq` of every record in the trees' journals (a record applied twice is there twice).
    func journalled() throws -> [Int] {
        try psql(#"SELECT m[1] FROM tree_journal, regexp_matches(convert_from(records, 'UTF8'), '"seq":(\d+)', 'g') AS m"#)
            .split(separator: "\n").compactMap { Int($0) }
    }

    /// Checks that every record of 1...`records` of every application was applied once.
    func expectEveryRecordAppliedOnce(_ records: Int) async throws {
        try await waitFor("the inbox drained", timeout: 30) { try self.psql("SELECT count(*) FROM inbox") == "0" }
        let journalled = try journalled()
        let expected = Set((1...records).flatMap { n in MultiInstanceTests.apps.indices.map { n * 10 + $0 } })
        #expect(Set(journalled) == expected, "not journalled: \(expected.subtracting(journalled).sorted().prefix(20))")
        #expect(journalled.count == Set(journalled).count, "records applied twice: \(journalled.count - Set(journalled).count)")
    }

    func log(_ index: Int) -> String { services[index].log.withLock { $0 } }

    /// How many lines of instance `index`'s log contain `text`.
    func count(_ text: String, in index: Int) -> Int { log(index).components(separatedBy: text).count - 1 }

    /// Waits for `condition`, polling every 50 ms; returns the seconds from `since` to when it
    /// held.
    func measure(_ what: String, since: Date, timeout: Double, _ condition: () throws -> Bool) async throws -> Double {
        try await waitFor(what, timeout: timeout) { (try? condition()) ?? false }
        return Date().timeIntervalSince(since)
    }
}

/// Seconds, for the timings the tests print.
func seconds(_ value: Double) -> String { String(format: "%.2f s", value) }
