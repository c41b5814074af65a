import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Hosts of a test's own on this machine: network namespaces joined by veth pairs, made with
/// `ip` as root (as CI runs). One namespace is the hub (PostgreSQL's host); every other host has
/// one link to it, a /30 of its own:
///
///     host n1  [to-hub 10.199.1.2/30] ──veth── [to-n1 10.199.1.1/30]  hub
///     host n2  [to-hub 10.199.2.2/30] ──veth── [to-n2 10.199.2.1/30]
///
/// A partition is a link set down (``partition(_:)``: the host's end, so both ends lose their
/// carrier), healed by setting it up again (``heal(_:)``). Nothing here touches the machine's
/// own network: both ends of each veth are created directly inside namespaces made here,
/// named after this test process (`pdn<pid>-<n>-…`), and deleted by ``destroy()``, at exit, or
/// by the next run when this process died without either.
public final class TestNetwork: Sendable {
    public struct Host: Sendable {
        /// `n1`, `n2`, …
        public let name: String
        /// Its network namespace (`ip netns exec NAMESPACE …`).
        public let namespace: String
        /// Its address on its link to the hub.
        public let address: String
        /// The hub's address on that link: where this host reaches the hub.
        public let hubAddress: String
        /// Its end of the link, in its namespace.
        public let device: String
    }

    /// The hub's namespace.
    public let hub: String
    public let hosts: [Host]

    /// Whether the network tests run: namespaces can be made here (root with `ip`), or CI
    /// requires them (`TEST_PUSHDISPATCH_REQUIRE_NETNS=1`: they then fail and say why).
    public static var enabled: Bool {
        if case .success = available { return true }
        return ProcessInfo.processInfo.environment["TEST_PUSHDISPATCH_REQUIRE_NETNS"] == "1"
    }

    /// Why the network tests are skipped.
    public static let skipReason: Comment =
        "needs root and `ip netns` (network namespaces and veth pairs); TEST_PUSHDISPATCH_REQUIRE_NETNS=1 requires them"

    /// Whether a namespace could be made and deleted, tried once; or why not.
    public static let available: Result<Void, TestNetworkError> = {
        guard getuid() == 0 else { return .failure(TestNetworkError("not root: network namespaces need CAP_SYS_ADMIN")) }
        guard FileManager.default.isExecutableFile(atPath: ip) else { return .failure(TestNetworkError("\(ip) is missing (apt-get install iproute2)")) }
        sweep()
        let probe = "pdn\(getpid())-probe"
        do {
            try run(["netns", "add", probe])
            try run(["netns", "del", probe])
            return .success(())
        } catch {
            return .failure(error as? TestNetworkError ?? TestNetworkError("\(error)"))
        }
    }()

    static let ip = "/usr/sbin/ip"
    static let counter = Atomic<Int>(0)

    /// Makes the hub and `hosts` hosts linked to it; throws (after deleting what it made) when it
    /// cannot.
    public static func make(hosts count: Int) throws -> TestNetwork {
        try available.get()
        let prefix = "pdn\(getpid())-\(counter.add(1, ordering: .relaxed).newValue)-"
        let hub = prefix + "hub"
        var hosts: [Host] = []
        for index in 1...count {
            hosts.append(
                Host(
                    name: "n\(index)", namespace: prefix + "n\(index)", address: "10.199.\(index).2", hubAddress: "10.199.\(index).1",
                    device: "to-hub"))
        }
        let network = TestNetwork(hub: hub, hosts: hosts)
        made.withLock { $0.append(contentsOf: [hub] + hosts.map(\.namespace)) }
        _ = deletesAtExit
        do {
            for namespace in [hub] + hosts.map(\.namespace) {
                try run(["netns", "add", namespace])
                try run(["-n", namespace, "link", "set", "lo", "up"])
            }
            for host in hosts {
                let hubDevice = "to-" + host.name
                try run(["link", "add", host.device, "netns", host.namespace, "type", "veth", "peer", "name", hubDevice, "netns", hub])
                try run(["-n", host.namespace, "addr", "add", host.address + "/30", "dev", host.device])
                try run(["-n", hub, "addr", "add", host.hubAddress + "/30", "dev", hubDevice])
                try run(["-n", host.namespace, "link", "set", host.device, "up"])
                try run(["-n", hub, "link", "set", hubDevice, "up"])
            }
        } catch {
            network.destroy()
            throw error
        }
        return network
    }

    init(hub: String, hosts: [Host]) {
        self.hub = hub
        self.hosts = hosts
    }

    /// Cuts `host` off the hub: its link down.
    public func partition(_ host: Host) throws {
        try Self.run(["-n", host.namespace, "link", "set", host.device, "down"])
    }

    /// Joins `host` to the hub again: its link up (its address and route come back with it).
    public func heal(_ host: Host) throws {
        try Self.run(["-n", host.namespace, "link", "set", host.device, "up"])
    }

    /// Deletes the namespaces (their veths go with them). Processes still running in one keep it
    /// alive, unnamed, until they end: stop them first.
    public func destroy() {
        for namespace in [hub] + hosts.map(\.namespace) {
            _ = try? Self.run(["netns", "del", namespace])
        }
        let gone = Set([hub] + hosts.map(\.namespace))
        Self.made.withLock { $0.removeAll { gone.contains($0) } }
    }

    /// `executable arguments…` run inside `namespace` (`ip netns exec`, which execs: the process
    /// keeps its id, so a signal to it reaches the program).
    public static func command(in namespace: String, _ executable: String, _ arguments: [String]) -> (executable: URL, arguments: [String]) {
        (URL(fileURLWithPath: ip), ["netns", "exec", namespace, executable] + arguments)
    }

    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        let result = try PostgresTestServer.execute(ip, arguments)
        guard result.status == 0 else {
            throw TestNetworkError("ip \(arguments.joined(separator: " ")) failed (status \(result.status)): \(result.text)")
        }
        return result.text
    }

    /// Namespaces made by this process and not deleted yet.
    static let made = Mutex<[String]>([])

    static let deletesAtExit: Void = {
        atexit {
            for namespace in TestNetwork.made.withLock({ $0 }) { _ = try? PostgresTestServer.execute(TestNetwork.ip, ["netns", "del", namespace]) }
        }
    }()

    /// Deletes the namespaces of test processes that died without deleting theirs.
    static func sweep() {
        guard let list = try? PostgresTestServer.execute(ip, ["netns", "list"]), list.status == 0 else { return }
        for line in list.text.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            guard name.hasPrefix("pdn"), let pid = Int32(name.dropFirst(3).prefix { $0.isNumber }), pid != getpid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { _ = try? PostgresTestServer.execute(ip, ["netns", "del", name]) }
        }
    }
}

public struct TestNetworkError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
