import Foundation
import PushCore
import PushFakes
import PushJOSE
import PushJSON
import PushTestSupport
import Testing

/// The running service against its OpenAPI document (`docs/openapi.yaml`), with Schemathesis
/// (PyPI, installed here when missing): every described operation with the document's
/// examples, the coverage phase's boundary values, random and invalid inputs, and stateful
/// sequences along the document's links (create → read → refresh → delete), checking that no
/// answer is a server error and that each answer's status, content type, headers and body are
/// the documented ones. On SQLite and on PostgreSQL. `GET /ops/v1/events` is left out: its
/// answer is a stream that does not end (OperationsEndToEndTests reads it).
@Suite("The API against its OpenAPI document (Schemathesis), as a process", .processLevel, .serialized)
struct APIContractTests {
    enum Store: String, CaseIterable, CustomTestStringConvertible {
        case sqlite, postgres
        var testDescription: String { rawValue }
    }

    static let operationsToken = "contract-operations-token-0123456789"
    static let secret = "contract-secret-of-at-least-thirty-two-bytes"
    static var repository: URL { URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent() }
    static let env = URL(fileURLWithPath: "/usr/bin/env")

    /// What CI checks: no server error; the status, content type, headers and body of every
    /// answer as documented.
    static let checks =
        "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,"
        + "unsupported_method,allow_header_conformance"

    /// `TEST_PUSHDISPATCH_SCHEMATHESIS_<name>`: `EXAMPLES` (per operation, default 40), `SEED`
    /// (default fixed, so that CI repeats itself), `CHECKS` (default ``checks``; `all` for more),
    /// to run it harder by hand.
    static func setting(_ name: String) -> String? {
        ProcessInfo.processInfo.environment["TEST_PUSHDISPATCH_SCHEMATHESIS_\(name)"]
    }

    static func token(_ subject: String) throws -> String {
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        let claims: JSON = ["sub": .string(subject), "exp": .int(Int64(Date().timeIntervalSince1970) + 3_600)]
        return String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(Array(claims.description.utf8)), as: UTF8.self)
    }

    @Test("Schemathesis: no server error; statuses, content types and answers as documented", arguments: Store.allCases)
    func schemathesis(_ store: Store) async throws {
        if store == .postgres && !PostgresTestServer.enabled {
            print("Schemathesis on PostgreSQL skipped: no PostgreSQL server (TEST_PUSHDISPATCH_REQUIRE_POSTGRES=1 requires it)")
            return
        }
        try PythonPackages.require("schemathesis")
        let fakes = try await FakeProviders.start(tls: true, webhooks: ["orders": ServiceEndToEndTests.webhookSecret])
        defer { Task { await fakes.stop() } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-contract-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
        let storeLine = store == .sqlite ? "store: {sqlite: ./store.db}" : "store: {postgres: \"\(try PostgresTestServer.shared.get().createDatabase())\"}"
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            \(storeLine)
            ingest: {queueFile: ./changes.ndjson, deadLetter: ./dead.ndjson}
            http: {port: 0, operationsToken: env:PD_TEST_CONTRACT_OPERATIONS_TOKEN}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 60s}
            apps:
              toto:
                auth: {hs256Secret: "\(Self.secret)"}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
                webhooks: {orders: {url: "\(fakes.webhookURL("orders"))", secret: "\(ServiceEndToEndTests.webhookSecret)"}}
                keys: "\(ServiceEndToEndTests.keyset.path)"
                signingKey: sig-es
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil))
        let service = try RunningService(config: config, environment: ["PD_TEST_CONTRACT_OPERATIONS_TOKEN": Self.operationsToken])
        defer { _ = service.stop() }
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }

        let reports = Self.repository.appendingPathComponent(".build/artifacts/schemathesis-\(store.rawValue)")
        let run = try Executable.run(
            Self.env,
            [
                "python3", "-c", "from schemathesis.cli import schemathesis; schemathesis()",
                "--config-file", Self.repository.appendingPathComponent("Tests/api/schemathesis.toml").path,
                "run", Self.repository.appendingPathComponent("docs/openapi.yaml").path,
                "--url", "http://127.0.0.1:\(port)",
                "--checks", Self.setting("CHECKS") ?? Self.checks,
                "--exclude-path", "/ops/v1/events",
                "--max-examples", Self.setting("EXAMPLES") ?? "40", "--seed", Self.setting("SEED") ?? "20261128", "--workers", "1", "--request-timeout", "10",
                "--report", "junit", "--report-dir", reports.path, "--generation-database", "none", "--no-color",
            ],
            environment: ["PD_API_SUBSCRIBER_TOKEN": try Self.token("alice"), "PD_API_OPERATIONS_TOKEN": Self.operationsToken])
        #expect(run.status == 0, "Schemathesis found failures (report in \(reports.path)):\n\(run.stdout.suffix(12_000))\n\(run.stderr.suffix(2_000))")
        #expect(!run.stdout.isEmpty)
        // Whatever it sent, the service is still up and stops cleanly.
        #expect(try RunCommandTests.curl(["http://127.0.0.1:\(port)/healthz"]).status == 200)
        #expect(service.stop() == 0, "\(service.log.withLock { $0 }.suffix(4_000))")
    }

    /// The README's client: generated from the running service's `/openapi.json` with
    /// openapi-python-client (PyPI), then used as the README shows.
    @Test("a Python client generated from /openapi.json creates, reads, lists and deletes a subscription")
    func generatedClient() async throws {
        try PythonPackages.require("openapi_python_client", package: "openapi-python-client")
        try PythonPackages.require("joserfc")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-client-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson}
            http: {port: 0}
            apps:
              toto:
                auth: {hs256Secret: "\(Self.secret)"}
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil))
        let service = try RunningService(config: config)
        defer { _ = service.stop() }
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
        let generate = try Executable.run(
            Self.env,
            [
                "python3", "-c", "from openapi_python_client.cli import app; app()", "generate", "--url", "http://127.0.0.1:\(port)/openapi.json",
                "--meta", "none", "--output-path", folder.appendingPathComponent("pushdispatch_client").path,
            ])
        #expect(generate.status == 0 && !generate.stdout.contains("WARNING") && !generate.stderr.contains("WARNING"), "\(generate.stdout)\(generate.stderr)")
        let script = """
            import sys
            sys.path.insert(0, sys.argv[1])
            from pushdispatch_client import AuthenticatedClient
            from pushdispatch_client.api.subscriptions import create_subscription, delete_subscription, get_subscription, list_subscriptions
            from pushdispatch_client.models import DeviceSubscriptionRequest, DeviceSubscriptionRequestKind, Mode

            client = AuthenticatedClient(base_url=sys.argv[2], token=sys.argv[3])
            created = create_subscription.sync(app="toto", uid="u1", client=client, body=DeviceSubscriptionRequest(
                kind=DeviceSubscriptionRequestKind.MOBILE, mode=Mode.VALUE, path="/users/u1", context="fcm-token-1"))
            assert created.path == "/users/u1" and created.mode == Mode.VALUE, created
            assert get_subscription.sync(app="toto", uid="u1", id=created.id, client=client).id == created.id
            assert [found.id for found in list_subscriptions.sync(app="toto", uid="u1", client=client)] == [created.id]
            assert delete_subscription.sync_detailed(app="toto", uid="u1", id=created.id, client=client).status_code == 204
            assert list_subscriptions.sync(app="toto", uid="u1", client=client) == []
            print("PASS")
            """
        let run = try Executable.run(Self.env, ["python3", "-c", script, folder.path, "http://127.0.0.1:\(port)", try Self.token("u1")])
        #expect(run.status == 0 && run.stdout.hasSuffix("PASS\n"), "\(run.stdout)\(run.stderr)")
        #expect(service.stop() == 0)
    }
}
