import Foundation
import PushDispatchClient
import PushFakes
import PushTestSupport
import Testing

/// A redirect is not followed: it would carry the bearer token to wherever it points.
@Suite("Redirects are refused", .processLevel)
struct RedirectTests {
    /// An HTTP server (Python's) on loopback that redirects every request for the API to
    /// `/elsewhere`, which answers `[]`.
    static let server = """
        import http.server, sys
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.startswith("/datasync"):
                    self.send_response(302); self.send_header("Location", "/elsewhere"); self.send_header("Content-Length", "0"); self.end_headers()
                else:
                    self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"[]")
            def log_message(self, *arguments): pass
        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """

    @Test("a 302 is an invalid answer, not followed with the token")
    func refused() async throws {
        let process = TestProcesses.make(command: "python3", ["-c", Self.server])
        let output = Pipe()
        process.standardOutput = output
        try TestProcesses.launch(process)
        defer { process.terminate() }
        let line = try await onThread { String(decoding: output.fileHandleForReading.availableData, as: UTF8.self) }
        let port = try #require(Int(line.trimmingCharacters(in: .whitespacesAndNewlines)))
        let push = try PushDispatch(
            .init(baseURL: URL(string: "http://127.0.0.1:\(port)")!, app: "toto", credentials: { _ in Credentials(uid: "u", token: "secret-token") }))
        await #expect {
            _ = try await push.subscriptions()
        } throws: { error in
            guard let error = error as? PushClientError else { return false }
            return error.code == .invalidResponse && error.status == 302 && !error.description.contains("secret-token")
        }
    }
}
