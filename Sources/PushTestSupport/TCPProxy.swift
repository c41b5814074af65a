import Foundation
import Synchronization

/// The tests' own TCP proxy (`Tests/network/tcpproxy.py`, Toxiproxy-style), one Python process
/// for every route of a test: relays across network namespaces, and the faults of a bad link
/// (delay, loss, connections cut) on the routes a test degrades. Its documentation says how
/// loss is modelled. It dies with the test process (its standard input closes, and
/// ``TestProcesses`` kills it).
public final class TCPProxy: Sendable {
    /// A route: `listen` → `target`, each `[namespace@]host:port` (port 0 to listen on a free one).
    public struct Route: Sendable {
        public var name: String
        public var listen: String
        public var target: String

        public init(_ name: String, listen: String, target: String) {
            self.name = name
            self.listen = listen
            self.target = target
        }
    }

    let process: Process
    let input: FileHandle
    let output = Output()
    /// The port each route listens on.
    public let ports: [String: Int]

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Tests/network/tcpproxy.py").path

    /// Starts the proxy and waits until every route listens.
    public init(routes: [Route], seed: Int = 1) throws {
        process = TestProcesses.make(command: "python3", ["-u", Self.script, "--seed", String(seed)] + routes.map { "\($0.name)=\($0.listen)->\($0.target)" })
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stdout
        input = stdin.fileHandleForWriting
        try TestProcesses.launch(process)
        let output = self.output
        stdout.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            guard !data.isEmpty else { return }
            output.lines.withLock { $0.append(contentsOf: String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)) }
        }
        let end = Date().addingTimeInterval(30)
        var ready: String?
        while ready == nil {
            ready = output.lines.withLock { lines in
                guard let index = lines.firstIndex(where: { $0.hasPrefix("ready") }) else { return nil }
                defer { lines.removeSubrange(...index) }
                return lines[index]
            }
            guard ready == nil else { break }
            guard process.isRunning, Date() < end else {
                throw TestNetworkError("the TCP proxy did not start: \(output.lines.withLock { $0.joined(separator: "\n") })")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        var ports: [String: Int] = [:]
        for word in ready!.split(separator: " ").dropFirst(2) {
            let parts = word.split(separator: "=")
            if parts.count == 2, let port = Int(parts[1]) { ports[String(parts[0])] = port }
        }
        self.ports = ports
    }

    /// Sends one command (`delay NAME MS`, `loss NAME P`, `cut NAME`, `stats`) and returns its answer.
    @discardableResult
    public func command(_ line: String) throws -> String {
        output.lines.withLock { $0.removeAll() }
        input.write(Data((line + "\n").utf8))
        let end = Date().addingTimeInterval(10)
        while Date() < end {
            if let answer = output.lines.withLock({ $0.first }) {
                guard !answer.hasPrefix("error") else { throw TestNetworkError("tcpproxy: \(answer)") }
                return answer
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
        throw TestNetworkError("tcpproxy did not answer \(line)")
    }

    /// What the proxy printed and nobody read yet, line by line.
    final class Output: Sendable {
        let lines = Mutex<[String]>([])
    }

    /// Ends the proxy (its connections with it).
    public func stop() {
        try? input.close()
        if process.isRunning { process.terminate() }
    }
}
