import Foundation
import PushFakes
import PushJSON
import PushTestSupport
import Testing

/// The console in headless Chromium (SPEC §13.4), driven by `Tests/browser/console_test.py`
/// (Selenium, axe-core's rules) against the executable and the fake providers: sign-in, the
/// overview, a delivery on the live page within 2 s, a subscription's 503-then-delivered
/// timeline, a record's "denied", a paused webhook resumed from the page (then delivered), the
/// rules playground, keyboard use, a phone's width, no error in the browser's console.
/// Screenshots of each page go to `.build/artifacts/console/`. Needs `chromium`,
/// `chromium-driver` (Debian) and Python's `selenium` and `axe-selenium-python` (installed here
/// when missing, if pip can); skipped without them unless `TEST_PUSHDISPATCH_REQUIRE_BROWSER=1`
/// (CI).
@Suite("The console in a real browser", .processLevel, .serialized)
struct ConsoleBrowserTests {
    static let token = "console-token-0123456789abcdef"
    static var repository: URL { URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent() }

    /// `python3` as the shell finds it (the one pip installs for).
    static let env = URL(fileURLWithPath: "/usr/bin/env")

    /// Why the browser cannot run here, or `nil`.
    static func missing() -> String? {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is missing (apt-get install chromium chromium-driver)"
        }
        func importable() -> Bool {
            (try? Executable.run(Self.env, ["python3", "-c", "import selenium, axe_selenium_python"]).status) == 0
        }
        if importable() { return nil }
        _ = try? Executable.run(Self.env, ["python3", "-m", "pip", "install", "--quiet", "selenium", "axe-selenium-python"])
        return importable() ? nil : "Python's selenium and axe-selenium-python cannot be imported (pip install selenium axe-selenium-python)"
    }

    @Test("sign in, overview, live, timeline, record, resume, playground, keyboard, phone, no console error")
    func console() async throws {
        if let reason = Self.missing() {
            if ProcessInfo.processInfo.environment["TEST_PUSHDISPATCH_REQUIRE_BROWSER"] == "1" {
                Issue.record("the browser tests are required here: \(reason)")
            } else {
                print("console browser test skipped: \(reason)")
            }
            return
        }
        let fakes = try await FakeProviders.start(tls: true, webhooks: ["orders": ServiceEndToEndTests.webhookSecret])
        defer { Task { await fakes.stop() } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-console-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        setenv("PD_TEST_CONSOLE_TOKEN", Self.token, 1)
        try Data(
            """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson, deadLetter: ./dead.ndjson}
            http: {port: 0, operationsToken: env:PD_TEST_CONSOLE_TOKEN}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 60s, retry: {initial: 200ms}}
            apps:
              toto:
                auth: {hs256Secret: "\(ServiceEndToEndTests.secret)"}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
                webhooks: {orders: {url: "\(fakes.webhookURL("orders"))", secret: "\(ServiceEndToEndTests.webhookSecret)"}}
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        let queue = folder.appendingPathComponent("changes.ndjson")
        #expect(FileManager.default.createFile(atPath: queue.path, contents: nil))
        let device = "console-fcm-device-token-0001"
        fakes.script(device, [.recorded("fcm-unavailable"), .normal])
        fakes.script("webhook:orders", [.status(401, body: "no"), .normal])
        let service = try RunningService(config: config)
        defer { _ = service.stop() }
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
        _ = try ServiceEndToEndTests.subscribe(port, #"{"kind":"mobile","mode":"value","format":"v2","path":"/a","context":"\#(device)"}"#)
        _ = try ServiceEndToEndTests.subscribe(port, #"{"kind":"mobile","mode":"value","format":"v2","path":"/b","context":"console-fcm-device-token-0002"}"#)
        _ = try ServiceEndToEndTests.subscribe(port, #"{"kind":"webhook","mode":"value","path":"/c","destination":"orders","context":"crm"}"#)
        try CrashTests.append(
            [
                #"{"seq":1,"app":"toto","op":"put","path":"/a","data":{"x":1}}"#,
                #"{"seq":2,"app":"toto","op":"revoke","path":"/b","reason":"permission_denied"}"#,
                #"{"seq":3,"app":"toto","op":"put","path":"/c","data":"hello"}"#,
            ], to: folder)
        let ops = ["-H", "Authorization: Bearer \(Self.token)"]
        try await ServiceEndToEndTests.eventually("the retry delivered and the webhook paused") {
            let delivered = fakes.received(provider: "fcm").filter { $0.target == device && $0.status == 200 }.count == 1
            let paused = try RunCommandTests.curl(ops + ["http://127.0.0.1:\(port)/ops/v1/senders"]).body.contains("orders")
            return delivered && paused
        }

        let artifacts = Self.repository.appendingPathComponent(".build/artifacts/console")
        let run = try Executable.run(
            Self.env,
            [
                "python3", Self.repository.appendingPathComponent("Tests/browser/console_test.py").path, "--base", "http://127.0.0.1:\(port)", "--token", Self.token,
                "--queue", queue.path, "--artifacts", artifacts.path, "--denied-record", "2", "--next-seq", "4",
            ])
        #expect(run.status == 0 && run.stdout.contains("\nPASS"), "\(run.stdout)\n\(run.stderr)")
        // The resume from the page delivered the webhook's notification.
        try await ServiceEndToEndTests.eventually("the webhook delivered") { fakes.received(provider: "webhook").contains { $0.status == 200 } }
        // The console's answers carry the policy: nothing from another origin.
        let page = try RunCommandTests.curl(["http://127.0.0.1:\(port)/console"])
        #expect(page.status == 200 && page.headers["content-security-policy"]?.hasPrefix("default-src 'self'") == true)
        #expect(service.stop() == 0)
    }
}
