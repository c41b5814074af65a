import Foundation
import PushFakes

#if canImport(Glibc)
import Glibc
#endif

/// A real HTTP/2 server on loopback for the transport's tests, with the test certificate of
/// `fixtures/tls/` (`127.0.0.1` and `localhost`): nginx (which answers before it reads a
/// request's body, as the shared benchmark's fake FCM does) or nghttpd (nghttp2's reference
/// server, echoing each request's body). The process dies with the test process.
public final class HTTP2TestServer: Sendable {
    public let port: Int
    /// Every port it listens on (nginx may listen on several: one origin each).
    public let ports: [Int]
    let process: Process
    let folder: URL

    /// Whether the tests that need nginx and nghttpd run: both installed, or CI requires them
    /// (`TEST_PUSHDISPATCH_REQUIRE_HTTP2_SERVERS=1`: they then fail and say why).
    public static var enabled: Bool {
        (FileManager.default.isExecutableFile(atPath: nginxPath) && FileManager.default.isExecutableFile(atPath: nghttpdPath))
            || ProcessInfo.processInfo.environment["TEST_PUSHDISPATCH_REQUIRE_HTTP2_SERVERS"] == "1"
    }

    static let nginxPath = "/usr/sbin/nginx"
    static let nghttpdPath = "/usr/sbin/nghttpd"

    /// The FCM success answer both servers give.
    public static let answer = #"{"name":"projects/p/messages/0:1500415314455276%31bd1c9631bd1c96"}"#

    /// nginx as a fake FCM (and APNs, `/3/device/`) over TLS: `http2` on (else HTTP/1.1 only, to test the fallback),
    /// at most `requestsPerConnection` requests on a connection before it sends GOAWAY, on
    /// `ports` ports (distinct origins to one server).
    public static func nginx(http2: Bool = true, requestsPerConnection: Int = 1_000_000, ports count: Int = 1) throws -> HTTP2TestServer {
        guard FileManager.default.isExecutableFile(atPath: nginxPath) else {
            throw HTTP2TestServerError(description: "nginx is not installed (apt-get install -y nginx)")
        }
        let folder = try makeFolder("nginx")
        let tls = ProviderFixtures.root.appendingPathComponent("tls")
        var ports: [Int] = []
        while ports.count < max(1, count) {
            let port = try freePort()
            if !ports.contains(port) { ports.append(port) }
        }
        let listen = ports.map { "listen 127.0.0.1:\($0) ssl\(http2 ? " http2" : "");" }.joined(separator: "\n                ")
        let configuration = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(folder.path)/nginx.pid;
            error_log \(folder.path)/error.log;
            events { worker_connections 4096; }
            http {
              access_log off;
              client_body_temp_path \(folder.path)/body;
              client_body_buffer_size 16k;
              http2_max_concurrent_streams 1000;
              keepalive_requests \(requestsPerConnection);
              server {
                \(listen)
                ssl_certificate \(tls.appendingPathComponent("server.pem").path);
                ssl_certificate_key \(tls.appendingPathComponent("server-key.pem").path);
                ssl_protocols TLSv1.2 TLSv1.3;
                location /token { default_type application/json; return 200 '{"access_token":"ya29.fake","expires_in":3599,"token_type":"Bearer"}'; }
                location /v1/ { default_type application/json; return 200 '\(answer)'; }
                # APNs answers a push it took with 200 and no body.
                location /3/device/ { add_header apns-id 8C7E4C6D-7A50-4B0F-9C3E-000000000001; return 200 ''; }
              }
            }
            """
        try Data(configuration.utf8).write(to: folder.appendingPathComponent("nginx.conf"))
        let process = TestProcesses.make(URL(fileURLWithPath: nginxPath), ["-p", folder.path, "-c", folder.appendingPathComponent("nginx.conf").path, "-e", folder.appendingPathComponent("error.log").path])
        return try HTTP2TestServer(process: process, ports: ports, folder: folder, log: folder.appendingPathComponent("error.log"))
    }

    /// nghttpd with `--echo-upload`: each POST is answered 200 with its own body.
    public static func nghttpd() throws -> HTTP2TestServer {
        guard FileManager.default.isExecutableFile(atPath: nghttpdPath) else {
            throw HTTP2TestServerError(description: "nghttpd is not installed (apt-get install -y nghttp2-server)")
        }
        let folder = try makeFolder("nghttpd")
        let tls = ProviderFixtures.root.appendingPathComponent("tls")
        let port = try freePort()
        let process = TestProcesses.make(
            URL(fileURLWithPath: nghttpdPath),
            [
                "--echo-upload", "-d", folder.path, "--address=127.0.0.1", "--max-concurrent-streams=1000", String(port),
                tls.appendingPathComponent("server-key.pem").path, tls.appendingPathComponent("server.pem").path,
            ])
        return try HTTP2TestServer(process: process, ports: [port], folder: folder, log: nil)
    }

    init(process: Process, ports: [Int], folder: URL, log: URL?) throws {
        self.process = process
        self.port = ports[0]
        self.ports = ports
        self.folder = folder
        let output = FileHandle(forWritingAtPath: "/dev/null")
        process.standardOutput = output
        process.standardError = output
        try TestProcesses.launch(process)
        // Listening: a TCP connect succeeds.
        let deadline = Date().addingTimeInterval(20)
        while !ports.allSatisfy(Self.accepts) {
            guard process.isRunning, Date() < deadline else {
                let text = log.flatMap { try? String(contentsOf: $0, encoding: .utf8) } ?? ""
                stop()
                throw HTTP2TestServerError(description: "\(process.arguments?.dropFirst(3).first ?? "the server") did not start on ports \(ports): \(text.suffix(500))")
            }
            usleep(20_000)
        }
    }

    public var url: String { "https://127.0.0.1:\(port)" }

    /// The TCP connections established to the server's ports now, as the kernel counts them
    /// (`/proc/net/tcp`: the server's side of each).
    public var establishedConnections: Int {
        // Read to the end: procfs files say they are empty, so a read sized by `stat` gets nothing.
        guard let file = FileHandle(forReadingAtPath: "/proc/net/tcp") else { return -1 }
        defer { try? file.close() }
        let table = String(decoding: file.readDataToEndOfFile(), as: UTF8.self)
        let listening = Set(ports)
        return table.split(separator: "\n").dropFirst().reduce(0) { count, line in
            let fields = line.split(separator: " ")
            // local address (hex ip:port), remote address, state (01: ESTABLISHED)
            guard fields.count > 3, fields[3] == "01", let local = fields[1].split(separator: ":").last, let port = Int(local, radix: 16) else { return count }
            return listening.contains(port) ? count + 1 : count
        }
    }

    public func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: folder)
    }

    static func makeFolder(_ name: String) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// A port nothing listens on now (bound to 0, then released).
    public static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound else { throw HTTP2TestServerError(description: "no free port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func accepts(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

public struct HTTP2TestServerError: Error, CustomStringConvertible {
    public var description: String
}
