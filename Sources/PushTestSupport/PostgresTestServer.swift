import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL cluster for tests: `initdb` + `pg_ctl` from the Debian `postgresql`
/// package, on 127.0.0.1 and a free port, in a temporary folder, without durability (tests
/// only), stopped when the test process exits. `TEST_PUSHDISPATCH_POSTGRES`
/// (`postgres://user@host:port`) points the tests at an existing server instead.
///
/// Each test takes a database of its own (``createDatabase()``).
///
/// ``tls`` is a second cluster that accepts only TLS connections, with a certificate made for
/// the run (``Certificates``).
public final class PostgresTestServer: Sendable {
    public let host: String
    public let port: Int
    public let user: String
    let dataFolder: String?
    let binaries: String?
    /// The CA files of a TLS cluster (``tls``); `nil` for a cluster in clear.
    public let certificates: Certificates?
    /// The server options `pg_ctl start` was given (a cluster started here), for ``startAgain()``.
    let options: String?
    /// The network namespace the server runs in (``startOwn(in:port:)``), or `nil`.
    let namespace: String?

    /// The certificates of a TLS cluster, made with the `openssl` tool for the run, in PEM files.
    /// The server's certificate names `localhost` only (DNS:localhost, no IP address): a client
    /// that checks the host name accepts it at `localhost` and refuses it at 127.0.0.1.
    public struct Certificates: Sendable {
        /// The CA that signed the server's certificate.
        public let ca: String
        /// Another CA, which signed nothing the server shows.
        public let otherCA: String
    }

    /// Whether the PostgreSQL tests run: a server could be started, or CI requires them
    /// (`TEST_PUSHDISPATCH_REQUIRE_POSTGRES=1`: they then fail and say why). (Not
    /// `PUSHDISPATCH_*`: the service reads those variables as configuration.)
    public static var enabled: Bool {
        if case .success = shared { return true }
        return ProcessInfo.processInfo.environment["TEST_PUSHDISPATCH_REQUIRE_POSTGRES"] == "1"
    }

    /// The server, started on first use; or why none could be started.
    public static let shared: Result<PostgresTestServer, PostgresTestServerError> = start()

    /// A cluster with TLS, started on first use (always here, even with
    /// `TEST_PUSHDISPATCH_POSTGRES`: its certificates are made for it): `ssl = on`, and a
    /// `pg_hba.conf` that accepts TCP connections over TLS (`hostssl`) and rejects those in
    /// clear (`hostnossl … reject`). Its ``certificates`` say which CA signed what.
    public static let tls: Result<PostgresTestServer, PostgresTestServerError> = start(tls: true)

    /// Whether the TLS tests run: as ``enabled``, for ``tls``.
    public static var tlsEnabled: Bool {
        if case .success = tls { return true }
        return ProcessInfo.processInfo.environment["TEST_PUSHDISPATCH_REQUIRE_POSTGRES"] == "1"
    }

    init(
        host: String, port: Int, user: String, dataFolder: String?, binaries: String?, certificates: Certificates? = nil, options: String? = nil,
        namespace: String? = nil
    ) {
        self.namespace = namespace
        self.host = host
        self.port = port
        self.user = user
        self.dataFolder = dataFolder
        self.binaries = binaries
        self.certificates = certificates
        self.options = options
    }

    /// A cluster of the caller's own (never ``shared``, never `TEST_PUSHDISPATCH_POSTGRES`): a
    /// test that stops and starts its server (``stop()``, ``startAgain()``) takes one, so that
    /// no other test sees the outage. ``destroy()`` stops it for good; it is stopped at exit
    /// otherwise.
    public static func startOwn() throws -> PostgresTestServer {
        try start(tls: false, own: true).get()
    }

    /// A cluster of the caller's own on a host of its own: started inside the network namespace
    /// `namespace` (``TestNetwork``), listening there on every address (`listen_addresses = '*'`)
    /// and accepting every TCP client of that namespace's networks. The test itself reaches it
    /// through its Unix socket, which is a file and crosses namespaces: ``host`` is the socket's
    /// folder (``psql(_:_:)`` and ``createDatabase()`` use it); the instances reach it at the
    /// namespace's addresses on `port`.
    public static func startOwn(in namespace: String, port: Int = 5432) throws -> PostgresTestServer {
        try start(tls: false, own: true, namespace: namespace, port: port).get()
    }

    /// Stops the server (`pg_ctl stop -m fast`: sessions are cut, as in a failover or a
    /// restart by an operator), waiting until it is down.
    public func stop() throws {
        try control(["stop", "-m", "fast", "-w", "-t", "60"])
    }

    /// Starts the stopped server again, on the same port and data, waiting until it accepts
    /// connections.
    public func startAgain() throws {
        guard let dataFolder, let options else { throw PostgresTestServerError("not a cluster started here") }
        let folder = URL(fileURLWithPath: dataFolder).deletingLastPathComponent().path
        try control(["-l", folder + "/server.log", "-o", options, "-w", "-t", "60", "start"], detached: true)
    }

    /// Stops the server for good (`-m immediate`); its files stay in the temporary folder.
    public func destroy() {
        try? control(["stop", "-m", "immediate"])
    }

    func control(_ arguments: [String], detached: Bool = false) throws {
        guard let dataFolder, let binaries else { throw PostgresTestServerError("not a cluster started here") }
        let command = Self.command(binaries + "/pg_ctl", ["-D", dataFolder] + arguments, asRoot: getuid() == 0, namespace: namespace)
        let result = try Self.execute(command.executable, command.arguments, detached: detached)
        guard result.status == 0 else { throw PostgresTestServerError("pg_ctl \(arguments.joined(separator: " ")) failed: \(result.text)") }
    }

    /// A fresh, empty database: its URL.
    public func createDatabase() throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let output = try Self.execute(
            "/usr/bin/psql", ["-h", host, "-p", String(port), "-U", user, "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q", "-c", "CREATE DATABASE \(name)"])
        guard output.status == 0 else { throw PostgresTestServerError("CREATE DATABASE failed: \(output.text)") }
        return "postgres://\(user)@\(host):\(port)/\(name)"
    }

    /// Runs SQL with psql in `database` (tests that act as an operator would).
    public func psql(_ database: String, _ sql: String) throws -> (status: Int32, text: String) {
        try Self.execute("/usr/bin/psql", ["-h", host, "-p", String(port), "-U", user, "-d", database, "-v", "ON_ERROR_STOP=1", "-q", "-A", "-t", "-c", sql])
    }

    /// `tool arguments…`, as the postgres user when running as root (initdb refuses root), inside
    /// `namespace` when one is given.
    static func command(_ tool: String, _ arguments: [String], asRoot: Bool, namespace: String?) -> (executable: String, arguments: [String]) {
        var command = [tool] + arguments
        if asRoot { command = ["/usr/sbin/runuser", "-u", "postgres", "--"] + command }
        if let namespace { command = ["/usr/sbin/ip", "netns", "exec", namespace] + command }
        return (command[0], Array(command.dropFirst()))
    }

    static func start(tls: Bool = false, own: Bool = false, namespace: String? = nil, port chosenPort: Int? = nil) -> Result<
        PostgresTestServer, PostgresTestServerError
    > {
        if !tls, !own, let url = ProcessInfo.processInfo.environment["TEST_PUSHDISPATCH_POSTGRES"], let components = URLComponents(string: url),
            let host = components.host
        {
            return .success(PostgresTestServer(host: host, port: components.port ?? 5432, user: components.user ?? "postgres", dataFolder: nil, binaries: nil))
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        guard
            let binaries = versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }).map({ "/usr/lib/postgresql/\($0)/bin" })
                .first(where: { FileManager.default.isExecutableFile(atPath: $0 + "/initdb") })
        else {
            return .failure(PostgresTestServerError("no PostgreSQL server is installed (apt-get install postgresql) and TEST_PUSHDISPATCH_POSTGRES is not set"))
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-postgres-\(UUID().uuidString.prefix(8))").path
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            // initdb refuses to run as root: the cluster then belongs to the postgres user.
            let asRoot = getuid() == 0
            if asRoot { try FileManager.default.setAttributes([.ownerAccountName: "postgres"], ofItemAtPath: folder) }
            func run(_ tool: String, _ arguments: [String], detached: Bool = false) throws -> (status: Int32, text: String) {
                let command = command(binaries + "/" + tool, arguments, asRoot: asRoot, namespace: namespace)
                return try execute(command.executable, command.arguments, detached: detached)
            }
            let initdb = try run("initdb", ["-D", folder + "/data", "-A", "trust", "-U", "pushdispatch", "--no-sync", "-E", "UTF8", "--locale=C"])
            guard initdb.status == 0 else { return .failure(PostgresTestServerError("initdb failed: \(initdb.text)")) }
            let port = chosenPort ?? freePort()
            var options = "-p \(port) -k \(folder) -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
            var certificates: Certificates?
            if namespace != nil {
                // A host of its own: every address of its namespace, every client of its networks.
                let hba = folder + "/pg_hba.conf"
                try "local all all trust\nhost all all 0.0.0.0/0 trust\n".write(toFile: hba, atomically: false, encoding: .utf8)
                options = options.replacingOccurrences(of: "listen_addresses=127.0.0.1", with: "listen_addresses='*'") + " -c hba_file=\(hba)"
            }
            if tls {
                let made = try makeCertificates(folder + "/tls", owner: asRoot ? "postgres" : nil)
                certificates = made.certificates
                options += " -c ssl=on -c ssl_cert_file=\(made.serverCertificate) -c ssl_key_file=\(made.serverKey) -c hba_file=\(made.hba)"
            }
            // Detached: the server keeps what it inherits from pg_ctl; its log goes to server.log.
            let start = try run("pg_ctl", ["-D", folder + "/data", "-l", folder + "/server.log", "-o", options, "-w", "-t", "60", "start"], detached: true)
            guard start.status == 0 else {
                let log = (try? String(contentsOfFile: folder + "/server.log", encoding: .utf8)) ?? ""
                return .failure(PostgresTestServerError("pg_ctl start failed: \(start.text) \(log.suffix(500))"))
            }
            stopAtExit.withLock { $0.append((asRoot, binaries, folder + "/data")) }
            _ = stopsAtExit
            return .success(
                PostgresTestServer(
                    host: namespace == nil ? "127.0.0.1" : folder, port: port, user: "pushdispatch", dataFolder: folder + "/data", binaries: binaries,
                    certificates: certificates, options: options, namespace: namespace))
        } catch {
            return .failure(PostgresTestServerError("cannot start PostgreSQL: \(error)"))
        }
    }

    /// Makes, in `folder`, a CA, a server certificate it signs for `localhost` (DNS:localhost
    /// only), another CA, and a `pg_hba.conf` for TLS only. The server's key is readable by
    /// `owner` alone (PostgreSQL refuses a key others can read).
    static func makeCertificates(_ folder: String, owner: String?) throws -> (
        certificates: Certificates, serverCertificate: String, serverKey: String, hba: String
    ) {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let settings = """
            [req]
            distinguished_name = name
            prompt = no
            [name]
            CN = pushdispatch test
            [ca]
            basicConstraints = critical, CA:TRUE
            keyUsage = critical, keyCertSign, cRLSign
            subjectKeyIdentifier = hash
            [server]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature, keyEncipherment
            extendedKeyUsage = serverAuth
            subjectAltName = DNS:localhost
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid

            """
        try settings.write(toFile: folder + "/openssl.cnf", atomically: false, encoding: .utf8)
        func openssl(_ arguments: [String]) throws {
            let result = try execute("/usr/bin/openssl", arguments)
            guard result.status == 0 else { throw PostgresTestServerError("openssl \(arguments.first ?? "") failed: \(result.text)") }
        }
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for (name, subject) in [("ca", "/CN=pushdispatch test CA"), ("other-ca", "/CN=pushdispatch other test CA")] {
            try openssl(
                ["req", "-x509", "-config", folder + "/openssl.cnf", "-extensions", "ca", "-days", "2", "-subj", subject] + key
                    + ["-keyout", "\(folder)/\(name).key", "-out", "\(folder)/\(name).pem"])
        }
        try openssl(
            ["req", "-new", "-config", folder + "/openssl.cnf", "-subj", "/CN=localhost"] + key
                + ["-keyout", folder + "/server.key", "-out", folder + "/server.csr"])
        try openssl([
            "x509", "-req", "-in", folder + "/server.csr", "-CA", folder + "/ca.pem", "-CAkey", folder + "/ca.key", "-set_serial", "2",
            "-days", "2", "-extfile", folder + "/openssl.cnf", "-extensions", "server", "-out", folder + "/server.pem",
        ])
        // Local (Unix socket) connections as before; over TCP, TLS or nothing.
        let hba = """
            local all all trust
            hostssl all all 127.0.0.1/32 trust
            hostnossl all all 127.0.0.1/32 reject

            """
        try hba.write(toFile: folder + "/pg_hba.conf", atomically: false, encoding: .utf8)
        var attributes: [FileAttributeKey: Any] = [.posixPermissions: 0o600]
        if let owner { attributes[.ownerAccountName] = owner }
        try FileManager.default.setAttributes(attributes, ofItemAtPath: folder + "/server.key")
        return (Certificates(ca: folder + "/ca.pem", otherCA: folder + "/other-ca.pem"), folder + "/server.pem", folder + "/server.key", folder + "/pg_hba.conf")
    }

    /// Runs a tool to its end: its output (standard output and error) goes through a file, its
    /// input is /dev/null. `posix_spawn` and `waitpid` rather than Foundation's `Process`: a
    /// server that `pg_ctl` leaves running keeps whatever it inherited, and `Process` then never
    /// sees its child end.
    static func execute(_ executable: String, _ arguments: [String], detached: Bool = false) throws -> (status: Int32, text: String) {
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-spawn-\(UUID().uuidString)").path
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, detached ? "/dev/null" : outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw PostgresTestServerError("cannot run \(executable): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { throw PostgresTestServerError("waiting for \(executable): \(String(cString: strerror(errno)))") }
        }
        let exited = status & 0x7f == 0
        let code = exited ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        return (code, text)
    }

    /// A port nothing listens on now (the kernel's choice for port 0).
    static func freePort() -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// The clusters `atexit` stops: (as root, binaries folder, data folder).
let stopAtExit = Mutex<[(Bool, String, String)]>([])

/// Registers, once, the `atexit` handler that stops the clusters of ``stopAtExit`` and removes
/// their folders (a test run's clusters took up to a gigabyte each, and a machine running the
/// suites over and over filled its disk with them).
let stopsAtExit: Void = {
    atexit {
        for (asRoot, binaries, data) in stopAtExit.withLock({ $0 }) {
            let arguments = ["-D", data, "-m", "immediate", "stop"]
            _ = asRoot
                ? try? PostgresTestServer.execute("/usr/sbin/runuser", ["-u", "postgres", "--", binaries + "/pg_ctl"] + arguments)
                : try? PostgresTestServer.execute(binaries + "/pg_ctl", arguments)
            try? FileManager.default.removeItem(atPath: (data as NSString).deletingLastPathComponent)
        }
    }
}()

public struct PostgresTestServerError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
