import Foundation
import Hummingbird
import PushAPI
import PushStore
import PushTestSupport
import Testing

/// `docs/openapi.yaml`: a valid OpenAPI 3.1 document (openapi-spec-validator), served as
/// committed at `/openapi.json`, and describing every route the service serves, no more and
/// no fewer. (Schemathesis tests the running service against it: `APIContractTests`.)
@Suite("The OpenAPI document")
struct OpenAPIDocumentTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let document = root.appendingPathComponent("docs/openapi.yaml").path

    /// Runs `python3` with `arguments`: its status, standard output and error.
    static func python(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = TestProcesses.make(command: "python3", arguments)
        let (out, err) = (Pipe(), Pipe())
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try TestProcesses.launch(process)
        // Standard output first, to its end (the document is larger than a pipe holds); what
        // the script says on error is short.
        let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, stdout, stderr)
    }

    @Test("docs/openapi.yaml is a valid OpenAPI 3.1 document (openapi-spec-validator)")
    func valid() throws {
        try PythonPackages.require("openapi_spec_validator", package: "openapi-spec-validator")
        let run = try Self.python(["-m", "openapi_spec_validator", Self.document])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(OpenAPIDocument.json.contains(#""openapi": "3.1."#))
    }

    @Test("/openapi.json answers the committed document (run scripts/embed-openapi.py after editing it)")
    func served() async throws {
        try PythonPackages.require("yaml", package: "PyYAML")
        let run = try Self.python([Self.root.appendingPathComponent("scripts/embed-openapi.py").path, "--print"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == OpenAPIDocument.json + "\n", "docs/openapi.yaml differs from OpenAPIDocument: run scripts/embed-openapi.py")
        let harness = try APIHarness()
        try await harness.run { client in
            let reply = try await client.send(.get, "/openapi.json")
            #expect(reply.status == 200 && reply.headers[.contentType] == "application/json")
            #expect(reply.body == OpenAPIDocument.json)
        }
    }

    @Test("every route the service serves is in the document, and every operation in it is a route")
    func coverage() throws {
        try PythonPackages.require("yaml", package: "PyYAML")
        let script = """
            import sys, yaml
            document = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))
            for path, item in document["paths"].items():
                for method in ("get", "put", "post", "delete", "patch", "head", "options", "trace"):
                    if method in item:
                        print(method.upper(), path)
            """
        let run = try Self.python(["-c", script, Self.document])
        #expect(run.status == 0, "\(run.stderr)")
        let described = Set(run.stdout.split(separator: "\n").map(String.init))
        #expect(!described.isEmpty)

        let harness = try APIHarness()
        let control = TestControl(store: harness.store)
        let sessions = ConsoleSessions(clock: control.clock)
        let gate = OperationsRoutes(report: NoReport(), token: "ops-token-0123456789abcdef", host: "127.0.0.1", loopback: true, sessions: sessions)
        let router = ServiceRoutes.router(subscriptions: harness.api, gate: gate, control: control, sessions: sessions)
        let served = Set(router.routes.map { "\($0.method.rawValue) \($0.path.description)" })
        #expect(served.count > 20)
        for route in served.subtracting(described).sorted() {
            Issue.record("\(route) is served but not described in docs/openapi.yaml")
        }
        for route in described.subtracting(served).sorted() {
            Issue.record("\(route) is described in docs/openapi.yaml but not served")
        }
    }

    @Test("a method a served path does not serve is 405 with Allow, whatever the method; an unknown path 404")
    func methodNotAllowed() async throws {
        let harness = try APIHarness()
        let control = TestControl(store: harness.store)
        let sessions = ConsoleSessions(clock: control.clock)
        let gate = OperationsRoutes(report: NoReport(), token: nil, host: "127.0.0.1", loopback: true, sessions: sessions)
        let router = ServiceRoutes.router(subscriptions: harness.api, gate: gate, control: control, sessions: sessions)
        try await Application(router: router).test(.router) { client in
            let cases: [(String, String, Int, String?)] = [
                ("TRACE", "/healthz", 405, "GET, HEAD"),
                ("QUERY", "/ops/v1/recover", 405, "POST"),
                ("DELETE", "/ops/v1/subscriptions/toto/abc/history", 405, "GET, HEAD"),
                ("PATCH", "/console/session", 405, "GET, HEAD, POST, DELETE"),
                ("PUT", "/datasync/v2/toto/subscriptions/u1", 405, "GET, HEAD, POST"),
                ("HEAD", "/healthz", 200, nil),
                ("GET", "/healthz/more", 404, nil),
                ("QUERY", "/nowhere", 404, nil),
            ]
            for (method, path, status, allow) in cases {
                try await client.execute(uri: path, method: HTTPRequest.Method(method)!, headers: [:], body: nil) { response in
                    #expect(Int(response.status.code) == status, "\(method) \(path)")
                    #expect(response.headers[.allow] == allow, "\(method) \(path)")
                    if status >= 400 { #expect(response.headers[.contentType] == "application/json", "\(method) \(path)") }
                }
            }
        }
    }
}
