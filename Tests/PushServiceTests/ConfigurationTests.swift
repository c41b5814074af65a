import Foundation
import PushCore
@testable import PushService
import Testing

@Suite("Configuration (SPEC §9)")
struct ConfigurationTests {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures")
    static let environment = [
        "TOTO_AUTH_SECRET": "a-secret-of-at-least-thirty-two-bytes!", "TOTO_HMS_SECRET": "hms", "TOTO_WEBHOOK_SECRET": "whsec",
    ]

    func load(_ text: String, _ environment: [String: String] = ConfigurationTests.environment) throws -> ServiceConfiguration {
        try ConfigurationLoader.load(text: text, baseDirectory: "/etc/pd", environment: environment)
    }

    func error(_ text: String, _ environment: [String: String] = ConfigurationTests.environment) -> String {
        do {
            _ = try load(text, environment)
            return "no error"
        } catch {
            return String(describing: error)
        }
    }

    @Test("the sample configuration loads, paths resolved against its folder")
    func sample() throws {
        let path = Self.fixtures.appendingPathComponent("config/sample.yaml").path
        let configuration = try ConfigurationLoader.load(path: path, environment: Self.environment)
        let folder = Self.fixtures.appendingPathComponent("config").path
        #expect(configuration.store == .sqlite(path: folder + "/pushdispatch.db"))
        #expect(configuration.http == .init(host: "127.0.0.1", port: 8080))
        #expect(configuration.delivery.retry == .init(initial: .seconds(1), multiplier: 2, jitter: 0.2, window: .seconds(7200)))
        let toto = try #require(configuration.apps["toto"])
        #expect(toto.auth?.hs256Secret?.value == Self.environment["TOTO_AUTH_SECRET"])
        #expect(toto.hms?.clientID == "1234567")
        #expect(toto.webhooks["orders"]?.url == "https://example.com/hooks/orders")
        #expect(toto.keys == Self.fixtures.appendingPathComponent("jose/test-keyset.json").path)
        #expect(toto.subscriptions.lifetimes == .init(defaultLifetime: 7 * 86_400, maxLifetime: 30 * 86_400))
        #expect(toto.subscriptions.maxWeight == 1 << 20)
    }

    @Test("an empty configuration takes every default")
    func defaults() throws {
        let configuration = try load("")
        #expect(configuration.store == .sqlite(path: "/etc/pd/pushdispatch.db"))
        #expect(configuration.ingest.deadLetter == "/etc/pd/dead-letter.ndjson")
        #expect(configuration.http.port == 8080 && configuration.http.host == "127.0.0.1")
        #expect(configuration.delivery.timeout == .seconds(10) && configuration.delivery.perProvider == 256)
        #expect(configuration.expiry.interval == .seconds(15))
        #expect(configuration.apps.isEmpty)
    }

    @Test("JSON is YAML")
    func json() throws {
        let configuration = try load(#"{"http":{"port":9000},"apps":{"a":{"webhooks":{"w":{"url":"http://h/x","secret":"s"}}}}}"#)
        #expect(configuration.http.port == 9000)
        #expect(configuration.apps["a"]?.webhooks["w"]?.secret.value == "s")
    }

    @Test("environment variables override keys, names matched case-insensitively")
    func environmentOverrides() throws {
        let text = """
            apps:
              my-app:
                fcm: {serviceAccountFile: sa.json}
                webhooks: {orders: {url: "https://a/b", secret: x}}
            """
        var environment = Self.environment
        environment["PUSHDISPATCH_HTTP_PORT"] = "9090"
        environment["PUSHDISPATCH_HTTP_HOST"] = "0.0.0.0"
        environment["PUSHDISPATCH_APPS_MY_APP_FCM_ENDPOINT"] = "https://fcm.test:8443"
        environment["PUSHDISPATCH_APPS_MY_APP_WEBHOOKS_ORDERS_SECRET"] = "env:TOTO_WEBHOOK_SECRET"
        environment["PUSHDISPATCH_DELIVERY_RETRY_INITIAL"] = "500ms"
        environment["PUSHDISPATCH_APPS_MY_APP_SUBSCRIPTIONS_MAXWEIGHT"] = "64KiB"
        let configuration = try load(text, environment)
        #expect(configuration.http == .init(host: "0.0.0.0", port: 9090))
        #expect(configuration.apps["my-app"]?.fcm?.endpoint == "https://fcm.test:8443")
        #expect(configuration.apps["my-app"]?.webhooks["orders"]?.secret.value == "whsec")
        #expect(configuration.delivery.retry.initial == .milliseconds(500))
        #expect(configuration.apps["my-app"]?.subscriptions.maxWeight == 64 << 10)
    }

    @Test("secrets come from the environment or a file, and are never printed")
    func secrets() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)")
        try Data("from-a-file-and-long-enough-to-sign-with\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let configuration = try load("apps: {a: {auth: {hs256Secret: \"file:\(file.path)\"}}}")
        let secret = try #require(configuration.apps["a"]?.auth?.hs256Secret)
        #expect(secret.value == "from-a-file-and-long-enough-to-sign-with")
        #expect("\(secret)" == "<secret>" && String(reflecting: secret) == "<secret>")
        #expect(!"\(configuration.apps["a"]!)".contains("from-a-file"))
    }

    @Test("bad configurations are refused with the key, the problem and what was expected", arguments: [
        ("htpp: {port: 1}", "htpp: unknown key; expected one of apps, delivery, expiry, http, ingest, store"),
        ("http: {port: 70000}", "http.port: 70000 is not a port; expected 0 to 65535"),
        ("http: {port: \"80\"}", "http.port: expected an integer"),
        ("http: [1]", "http: expected a mapping of keys, got an array"),
        ("delivery: {timeout: 10}", "delivery.timeout: expected a duration such as 500ms, 10s, 5m, 2h or 7d, got 10"),
        ("delivery: {timeout: 10 s}", "delivery.timeout: expected a duration"),
        ("delivery: {retry: {jitter: 2}}", "delivery.retry.jitter: 2.0 is out of range; expected 0.0 to 1.0"),
        ("delivery: {concurrency: {perApp: 0}}", "delivery.concurrency.perApp: at least 1, got 0"),
        ("store: {sqlite: a.db, postgres: postgres://x}", "store: give either sqlite or postgres, not both"),
        ("expiry: {interval: 5m}", "expiry.interval: at most 30s"),
        ("apps: {toto: {fmc: {}}}", "apps.toto.fmc: unknown key; expected one of auth, fcm, hms, keys, signingKey, subscriptions, webhooks"),
        ("apps: {toto: {auth: {}}}", "apps.toto.auth: give hs256Secret or jwks"),
        ("apps: {toto: {auth: {hs256Secret: short}}}", "apps.toto.auth.hs256Secret: 5 bytes; HS256 needs at least 32"),
        ("apps: {toto: {auth: {hs256Secret: env:NOPE}}}", "apps.toto.auth.hs256Secret: the environment variable NOPE is not set"),
        ("apps: {toto: {auth: {hs256Secret: file:/no/such/file}}}", "apps.toto.auth.hs256Secret: cannot read the secret file /no/such/file"),
        ("apps: {toto: {hms: {clientId: 1234567, clientSecret: x}}}", "apps.toto.hms.clientId: expected a string, got a number (quote it)"),
        ("apps: {toto: {webhooks: {w: {url: ftp://x, secret: s}}}}", "apps.toto.webhooks.w.url: expected an http(s) URL, got \"ftp://x\""),
        ("apps: {toto: {webhooks: {w: {url: https://x}}}}", "apps.toto.webhooks.w.secret: missing"),
        ("apps: {toto: {subscriptions: {defaultLifetime: 40d}}}", "apps.toto.subscriptions.defaultLifetime: longer than maxLifetime"),
        ("apps: {toto: {subscriptions: {maxWeight: 1MB}}}", "apps.toto.subscriptions.maxWeight: expected a size such as 4096, 64KiB or 1MiB"),
        ("apps: {\"a/b\": {}}", "apps.a/b: application id \"a/b\" contains '/'"),
        ("http: {port: 1}\nhttp: {port: 2}", "not valid YAML"),
        ("- 1", "the top level must be a mapping"),
    ])
    func refused(text: String, message: String) {
        let error = error(text)
        #expect(error.contains(message), "got: \(error)")
    }

    @Test("environment variables that match no key, or several, are refused")
    func badOverrides() {
        #expect(error("", ["PUSHDISPATCH_HTTP_PROT": "1"]).contains("PUSHDISPATCH_HTTP_PROT: no configuration key matches"))
        #expect(error("", ["PUSHDISPATCH_APPS_TOTO_KEYS": "k.json"]).contains("no configuration key matches"))
        let ambiguous = "apps: {a-b: {}, a: {}}"
        #expect(error(ambiguous, ["PUSHDISPATCH_APPS_A_B_KEYS": "x"]).contains("no configuration key matches") == false)
    }

    @Test("durations and sizes", arguments: [
        ("500ms", Duration.milliseconds(500)), ("10s", .seconds(10)), ("5m", .seconds(300)), ("2h", .seconds(7200)), ("7d", .seconds(604_800)),
    ])
    func durations(text: String, expected: Duration) {
        #expect(ConfigurationValues.duration(text) == expected)
    }

    @Test("invalid durations and sizes", arguments: ["", "s", "10", "1.5s", "-1s", "10 s", "10S", "1w"])
    func invalidDurations(text: String) {
        #expect(ConfigurationValues.duration(text) == nil)
    }

    @Test("sizes", arguments: [("4096", Int64(4096)), ("64KiB", 65536), ("1MiB", 1 << 20), ("2GiB", 2 << 30)])
    func sizes(text: String, expected: Int64) {
        #expect(ConfigurationValues.size(text) == expected)
    }
}
