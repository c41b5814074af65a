import Crypto
import Foundation
import PushContracts
import PushCore
import PushDelivery
import PushJSON
import PushJOSE
import PushIngest
@testable import PushService
import Testing

@Suite("Configuration (SPEC §9)")
struct ConfigurationTests {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures")
    static let environment = [
        "TOTO_AUTH_SECRET": "a-secret-of-at-least-thirty-two-bytes!", "TOTO_HMS_SECRET": "hms", "TOTO_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
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
        #expect(toto.apns?.teamID == "TEAM012345" && toto.apns?.keyID == "KEY0123456" && toto.apns?.topic == "com.example.toto")
        #expect(toto.apns?.environment == .production && toto.apns?.endpoint == "https://api.push.apple.com")
        #expect(toto.apns?.privateKey.value.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)
        #expect(toto.webpush?.subject == "mailto:push-admin@example.com" && toto.webpush?.allowPrivateAddresses == false)
        #expect(toto.webpush?.allowedHosts == ["fcm.googleapis.com", "*.push.services.mozilla.com", "web.push.apple.com", "*.notify.windows.com"])
        #expect(toto.keys == Self.fixtures.appendingPathComponent("jose/test-keyset.json").path)
        #expect(toto.subscriptions.lifetimes == .init(defaultLifetime: 7 * 86_400, maxLifetime: 30 * 86_400))
        #expect(toto.subscriptions.maxWeight == 1 << 20)
        #expect(configuration.ingest.deadLetterMaxSize == 256 << 20)
        #expect(configuration.shutdownTimeout == .seconds(60))
    }

    @Test("an empty configuration takes every default")
    func defaults() throws {
        let configuration = try load("")
        #expect(configuration.store == .sqlite(path: "/etc/pd/pushdispatch.db"))
        #expect(configuration.ingest.deadLetter == "/etc/pd/dead-letter.ndjson")
        #expect(configuration.ingest.deadLetterMaxSize == 1 << 30)
        #expect(configuration.http.port == 8080 && configuration.http.host == "127.0.0.1")
        #expect(configuration.delivery.timeout == .seconds(10) && configuration.delivery.perProvider == 1_024 && configuration.delivery.perApp == 512)
        #expect(configuration.delivery.perDestination == nil && configuration.http.maxConnections == 512)
        #expect(configuration.delivery.connectionsPerHost == 6)
        #expect(configuration.delivery.idleTimeout == .seconds(60) && configuration.delivery.maximumOrigins == 1_024)
        #expect(configuration.expiry.interval == .seconds(15))
        #expect(configuration.shutdownTimeout == .seconds(60))
        #expect(configuration.apps.isEmpty)
        #expect(configuration.ingest.socketLimits == SocketLimits())
        #expect(SocketLimits().mode == 0o660 && SocketLimits().maxConnections == 64 && SocketLimits().maxBufferedBytes == 8 << 20)
    }

    @Test("ingest.socket*: the socket's mode in octal, its connection limits, its idle timeout, its buffer and its shutdown grace")
    func socketLimits() throws {
        let configuration = try load(
            "ingest: {socketMode: \"0600\", socketMaxConnections: 8, socketIdleTimeout: 30s, socketMaxBuffered: 1MiB, socketShutdownGrace: 2s}")
        #expect(configuration.ingest.socketLimits == SocketLimits(
            mode: 0o600, maxConnections: 8, idleTimeout: .seconds(30), maxBufferedBytes: 1 << 20, shutdownGrace: .seconds(2)))
        #expect(try load("ingest: {socketMode: \"660\"}").ingest.socketLimits.mode == 0o660)
        #expect(try load("ingest: {socketMode: 0660}").ingest.socketLimits.mode == 0o660)
        #expect(try load("ingest: {socketMode: 640}").ingest.socketLimits.mode == 0o640)
        #expect(try load("ingest: {socketMode: \"0o666\"}").ingest.socketLimits.mode == 0o666)
        #expect(try load("", ConfigurationTests.environment.merging(["PUSHDISPATCH_INGEST_SOCKETMODE": "0640"]) { $1 }).ingest.socketLimits.mode == 0o640)
    }

    @Test("ingest.maxRecordBytes: 16MiB unless set, from 64KiB to 1GiB")
    func maxRecordBytes() throws {
        #expect(try load("").ingest.maxRecordBytes == 16 << 20)
        #expect(try load("ingest: {maxRecordBytes: 64KiB}").ingest.maxRecordBytes == 64 << 10)
        #expect(try load("ingest: {maxRecordBytes: 1GiB}").ingest.maxRecordBytes == 1 << 30)
        for bad in ["1KiB", "2GiB", "-1", "big"] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try load("ingest: {maxRecordBytes: \(bad)}") }
        }
    }

    @Test("operations.history: 7d and 1,000,000 rows unless set; 0 for either turns it off; bounds checked")
    func historyLimits() throws {
        #expect(try load("").operations.history == HistoryLimits(maxAge: 7 * 86_400_000, maxRows: 1_000_000))
        #expect(try load("").operations.history.isOn)
        #expect(try load("operations: {history: {maxAge: 2h, maxRows: 5000}}").operations.history == HistoryLimits(maxAge: 7_200_000, maxRows: 5_000))
        #expect(try load("operations: {history: {maxAge: 0}}").operations.history.isOn == false)
        #expect(try load("operations: {history: {maxAge: 0s}}").operations.history.isOn == false)
        #expect(try load("operations: {history: {maxRows: 0}}").operations.history.isOn == false)
        let environment = ConfigurationTests.environment.merging(["PUSHDISPATCH_OPERATIONS_HISTORY_MAXROWS": "0"]) { $1 }
        #expect(try load("", environment).operations.history.isOn == false)
        for (bad, message) in [
            ("{maxAge: 400d}", "operations.history.maxAge"), ("{maxAge: soon}", "operations.history.maxAge"),
            ("{maxRows: -1}", "operations.history.maxRows"), ("{maxRows: 2000000000}", "operations.history.maxRows"), ("{maxrows: 1}", "maxrows"),
        ] {
            #expect("\(bad)", performing: { try load("operations: {history: \(bad)}") }, throws: { "\($0)".contains(message) })
        }
    }

    @Test("delivery.pacing: FCM at its default quota unless set; rates per second, minute or hour, or off; per application and per webhook; bounds checked")
    func pacing() throws {
        let defaults = try load("").delivery
        #expect(defaults.pacing.byKind == [.fcm: 10_000])
        #expect(defaults.pacingTable(apps: [:]).policy(for: SenderKey(app: "toto", kind: .fcm))?.perSecond == 10_000)
        #expect(defaults.pacingTable(apps: [:]).policy(for: SenderKey(app: "toto", kind: .hms)) == nil)
        let configuration = try load(
            """
            delivery: {pacing: {fcm: 6000/min, hms: 50/s, webpush: 36000/h, retryAfterMaximum: 10m}}
            apps:
              toto:
                pacing: {fcm: 200/s, hms: "off"}
                webhooks: {orders: {url: "https://h.example/p", secret: env:TOTO_WEBHOOK_SECRET, pacing: 5/s}}
              titi: {}
            """)
        #expect(configuration.delivery.pacing.byKind == [.fcm: 100, .hms: 50, .webpush: 10])
        #expect(configuration.delivery.pacing.retryAfterMaximum == .seconds(600))
        let table = configuration.delivery.pacingTable(apps: configuration.apps)
        #expect(table.policy(for: SenderKey(app: "toto", kind: .fcm))?.perSecond == 200)
        #expect(table.policy(for: SenderKey(app: "toto", kind: .hms)) == nil)
        #expect(table.policy(for: SenderKey(app: "titi", kind: .fcm))?.perSecond == 100)
        #expect(table.policy(for: SenderKey(app: "toto", kind: .webhook, destination: "orders"))?.perSecond == 5)
        #expect(table.policy(for: SenderKey(app: "titi", kind: .webhook, destination: "orders")) == nil)
        #expect(table.policy(for: SenderKey(app: "toto", kind: .webpush, destination: "https://push.example"))?.perSecond == 10)
        #expect(table.retryAfterMaximum == 600_000)
        // Two live instances: each paces at half.
        var shared = table
        shared.instances = 2
        #expect(shared.policy(for: SenderKey(app: "toto", kind: .fcm))?.perSecond == 100)
        let environment = ConfigurationTests.environment.merging(["PUSHDISPATCH_DELIVERY_PACING_FCM": "off"]) { $1 }
        #expect(try load("", environment).delivery.pacingTable(apps: [:]).policy(for: SenderKey(app: "toto", kind: .fcm)) == nil)
        // A bare `off` is YAML 1.1's false: it means off, as written.
        #expect(try load("delivery: {pacing: {fcm: off}}").delivery.pacingTable(apps: [:]).policy(for: SenderKey(app: "toto", kind: .fcm)) == nil)
        for (bad, message) in [
            ("{fcm: on}", "delivery.pacing.fcm: expected a rate such as 200/s, 600000/min or 50000/h, or off, got true"),
            ("{fcm: 200}", "delivery.pacing.fcm: expected a rate such as 200/s, 600000/min or 50000/h, or off, got 200"),
            ("{fcm: 200/day}", "delivery.pacing.fcm: expected a rate"), ("{fcm: 30/min}", "delivery.pacing.fcm: 30/min is out of range"),
            ("{fcm: 2000000/s}", "delivery.pacing.fcm: 2000000/s is out of range"), ("{fcm: -5/s}", "delivery.pacing.fcm: expected a rate"),
            ("{apns: 99999999999999/s}", "delivery.pacing.apns: expected a rate"), ("{webhooks: 1/s}", "webhooks: unknown key"),
            ("{retryAfterMinimum: 2m, retryAfterMaximum: 1m}", "delivery.pacing.retryAfterMinimum: longer than delivery.pacing.retryAfterMaximum"),
        ] {
            #expect("\(bad)", performing: { try load("delivery: {pacing: \(bad)}") }, throws: { "\($0)".contains(message) })
        }
    }

    @Test("ingest.deadLetterMaxSize: a size from 64KiB to 1TiB, in YAML as text or a number, or from its variable")
    func deadLetterMaxSize() throws {
        #expect(try load("ingest: {deadLetterMaxSize: 64MiB}").ingest.deadLetterMaxSize == 64 << 20)
        #expect(try load("ingest: {deadLetterMaxSize: 65536}").ingest.deadLetterMaxSize == 64 << 10)
        #expect(try load("ingest: {deadLetterMaxSize: 1024GiB}").ingest.deadLetterMaxSize == 1 << 40)
        let environment = ConfigurationTests.environment.merging(["PUSHDISPATCH_INGEST_DEADLETTERMAXSIZE": "2GiB"]) { $1 }
        #expect(try load("ingest: {deadLetterMaxSize: 64MiB}", environment).ingest.deadLetterMaxSize == 2 << 30)
    }

    @Test("store.postgres: the URL is kept as written; its TLS parameters are checked without connecting")
    func postgresTLS() throws {
        let ca = Self.fixtures.appendingPathComponent("tls/ca.pem").path
        for query in ["", "?sslmode=disable", "?sslmode=verify-full&sslrootcert=\(ca)", "?sslrootcert=system", "?sslmode=require"] {
            let url = "postgres://u:pw@db.internal:5432/d" + query
            #expect(try load("store: {postgres: \"\(url)\"}").store == .postgres(url: url))
        }
    }

    @Test("JSON is YAML")
    func json() throws {
        let configuration = try load(#"{"http":{"port":9000},"apps":{"a":{"webhooks":{"w":{"url":"http://h/x","secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}}}}"#)
        #expect(configuration.http.port == 9000)
        #expect(configuration.apps["a"]?.webhooks["w"]?.secret.value == "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    }

    static let serviceAccount = fixtures.appendingPathComponent("config/toto-service-account.json").path

    @Test("environment variables override keys, names matched case-insensitively")
    func environmentOverrides() throws {
        let text = """
            apps:
              my-app:
                fcm: {serviceAccountFile: \(Self.serviceAccount)}
                webhooks: {orders: {url: "https://a/b", secret: x}}
            """
        var environment = Self.environment
        environment["PUSHDISPATCH_HTTP_PORT"] = "9090"
        environment["PUSHDISPATCH_HTTP_HOST"] = "0.0.0.0"
        environment["PUSHDISPATCH_APPS_MY_APP_FCM_ENDPOINT"] = "https://fcm.test:8443"
        environment["PUSHDISPATCH_APPS_MY_APP_WEBHOOKS_ORDERS_SECRET"] = "env:TOTO_WEBHOOK_SECRET"
        environment["PUSHDISPATCH_DELIVERY_RETRY_INITIAL"] = "500ms"
        environment["PUSHDISPATCH_DELIVERY_RETRY_JITTER"] = "0.5"
        environment["PUSHDISPATCH_APPS_MY_APP_SUBSCRIPTIONS_MAXWEIGHT"] = "64KiB"
        let configuration = try load(text, environment)
        #expect(configuration.http == .init(host: "0.0.0.0", port: 9090))
        #expect(configuration.apps["my-app"]?.fcm?.endpoint == "https://fcm.test:8443")
        #expect(configuration.apps["my-app"]?.webhooks["orders"]?.secret.value == "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        #expect(configuration.delivery.retry.initial == .milliseconds(500))
        #expect(configuration.delivery.retry.jitter == 0.5)
        #expect(configuration.apps["my-app"]?.subscriptions.maxWeight == 64 << 10)
    }

    @Test("an override is the variable's exact text, converted to the key's type")
    func overridesAreExact() throws {
        let text = "apps: {a: {hms: {clientId: \"1\", clientSecret: x}, auth: {hs256Secret: placeholder-placeholder-placeholder}}}"
        var environment = Self.environment
        // YAML would read 'abc #x' as "abc" (a comment) and 'yes' as a boolean: an override is text.
        environment["PUSHDISPATCH_APPS_A_HMS_CLIENTSECRET"] = "abc #x"
        environment["PUSHDISPATCH_APPS_A_AUTH_HS256SECRET"] = "yes-this-is-a-secret-of-32-bytes-or-more"
        environment["PUSHDISPATCH_APPS_A_AUTH_ISSUER"] = "null"
        var configuration = try load(text, environment)
        #expect(configuration.apps["a"]?.hms?.clientSecret.value == "abc #x")
        #expect(configuration.apps["a"]?.auth?.hs256Secret?.value == "yes-this-is-a-secret-of-32-bytes-or-more")
        #expect(configuration.apps["a"]?.auth?.issuer == "null")
        environment = Self.environment
        environment["PUSHDISPATCH_APPS_A_HMS_CLIENTSECRET"] = "yes"
        configuration = try load(text, environment)
        #expect(configuration.apps["a"]?.hms?.clientSecret.value == "yes")
    }

    @Test("a bad or empty override is refused, naming the variable and the key", arguments: [
        ("PUSHDISPATCH_HTTP_PORT", "", "PUSHDISPATCH_HTTP_PORT is set but empty; give it the value of http.port, or unset it"),
        ("PUSHDISPATCH_STORE_SQLITE", "", "PUSHDISPATCH_STORE_SQLITE is set but empty"),
        ("PUSHDISPATCH_HTTP_PORT", "80 # web", "PUSHDISPATCH_HTTP_PORT (http.port): expected an integer, got \"80 # web\""),
        ("PUSHDISPATCH_HTTP_PORT", "0x50", "expected an integer"),
        ("PUSHDISPATCH_HTTP_PORT", "70000", "http.port (set by PUSHDISPATCH_HTTP_PORT): 70000 is out of range"),
        ("PUSHDISPATCH_HTTP_HOST", "not a host", "http.host (set by PUSHDISPATCH_HTTP_HOST): expected an IP address"),
        ("PUSHDISPATCH_DELIVERY_RETRY_JITTER", "nan", "expected a decimal number"),
        ("PUSHDISPATCH_DELIVERY_RETRY_JITTER", "1e400", "expected a decimal number"),
        ("PUSHDISPATCH_EXPIRY_INTERVAL", "0s", "expiry.interval (set by PUSHDISPATCH_EXPIRY_INTERVAL): 0s is out of range"),
        (
            "PUSHDISPATCH_INGEST_DEADLETTERMAXSIZE", "1 GiB",
            "ingest.deadLetterMaxSize (set by PUSHDISPATCH_INGEST_DEADLETTERMAXSIZE): expected a size such as 4096, 64KiB or 1MiB, got \"1 GiB\""
        ),
    ])
    func badOverride(variable: String, value: String, message: String) {
        var environment = Self.environment
        environment[variable] = value
        let error = error("", environment)
        #expect(error.contains(message), "got: \(error)")
    }

    @Test("a secret never appears in a message, whatever goes wrong around it")
    func secretsNeverEchoed() {
        let secret = "s3cr3t-value-that-must-never-be-printed-anywhere"
        let texts = [
            // A YAML error (a duplicate key) next to the secret: the message holds no file text.
            "apps:\n  a:\n    auth: {hs256Secret: \"\(secret)\"}\n    auth: {hs256Secret: \"\(secret)\"}\n",
            "apps:\n  a:\n    auth: {hs256Secret: \"\(secret)\", audience: [1]}\n",
            "apps:\n  a:\n    auth: {hs256Secret: \"\(secret)\"\n",
            "store: {postgres: \"postgres://u:\(secret)@\"}",
            "apps: {a: {hms: {clientId: x, clientSecret: \"\(secret)\", endpoint: \"not a url\"}}}",
        ]
        for text in texts {
            let message = error(text)
            #expect(message != "no error")
            #expect(!message.contains(secret), "\(message)")
        }
        var environment = Self.environment
        environment["PUSHDISPATCH_STORE_POSTGRES"] = "mysql://u:\(secret)@h"
        #expect(!error("", environment).contains(secret))
    }

    @Test("http.host: what counts as loopback (where /metrics and /status stay open without a token)", arguments: [
        ("127.0.0.1", true), ("127.8.9.10", true), ("localhost", true), ("LOCALHOST", true), ("::1", true), ("::ffff:127.0.0.1", true),
        ("0.0.0.0", false), ("::", false), ("10.0.0.1", false), ("192.168.1.2", false), ("example.com", false), ("localhost.example", false),
        ("::2", false), ("0177.0.0.1", false),
    ] as [(String, Bool)])
    func loopbackHosts(host: String, loopback: Bool) {
        #expect(ServiceConfiguration.HTTP(host: host, port: 8080).isLoopback == loopback, "\(host)")
    }

    @Test("every problem is reported at once")
    func everyProblem() throws {
        do {
            _ = try load("http: {port: -1, host: \"a b\"}\nexpiry: {interval: 0s}\nhtpp: {}")
            Issue.record("accepted")
        } catch let error as ConfigurationError {
            #expect(error.problems.count == 4, "\(error.problems)")
            let found = Dictionary(error.problems.map { ($0.key ?? "", $0.kind) }, uniquingKeysWith: { first, _ in first })
            #expect(found == ["http.port": .invalid, "http.host": .invalid, "expiry.interval": .invalid, "htpp": .unknownKey], "\(error.problems)")
            #expect(error.problems.contains { $0.description.hasPrefix("htpp: unknown key") })
        }
    }

    @Test("YAML input is bounded: aliases, depth, size")
    func yamlLimits() {
        // Nine levels of aliases would expand to 10^9 values.
        var bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1...9 {
            let previous = level == 1 ? "a" : "l\(level - 1)"
            bomb += "l\(level): &l\(level) [" + Array(repeating: "*\(previous)", count: 10).joined(separator: ", ") + "]\n"
        }
        let start = ContinuousClock.now
        #expect(error(bomb).contains("aliases and anchors are not supported"))
        #expect(ContinuousClock.now - start < .seconds(10))  // expanded, 10^9 values would take minutes
        #expect(error("a: &x 1\nb: *x").contains("line 2: a '*'"))
        #expect(error("a: &x 1").contains("YAML anchors and aliases (&name, *name) are not supported"))
        // Aliases as complex keys: Yams would hash the expanded key while composing.
        #expect(error(bomb + "? *l9\n: 1\n").contains("not supported"))
        #expect(error("apps:\n  - *x\n").contains("line 2: a '*'"))
        #expect(error("apps: {a: *x}").contains("line 1: a '*'"))
        // & and * inside values are values.
        for text in [
            "apps: {a: {webhooks: {w: {url: \"https://h/p?a=1&b=2\", secret: \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"}}, hms: {clientId: \"1\", clientSecret: \"x*y\"}}}",
            "apps: {a: {webhooks: {w: {url: 'https://h/p?a=1&b=2', secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'}}, hms: {clientId: '1', clientSecret: 'it''s a*y'}}}",
            "apps: {a: {webhooks: {w: {url: https://h/p?a=1&b=2, secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}}, hms: {clientId: '1', clientSecret: a*b&c}}}  # a*comment &x",
        ] {
            #expect(error(text) == "no error", "\(text): \(error(text))")
        }
        // Aliases right after a quoted key, in flow style, or after a quote that opens no
        // quoted text: found whatever the quotes around them.
        var flow = "{\"l0\":&a0 {\"x\":1,\"y\":2},\n"
        for level in 1...40 { flow += " \"l\(level)\":&a\(level) {\"x\":*a\(level - 1),\"y\":*a\(level - 1)},\n" }
        flow += " \"m\":{? {\"k\":*a40} : 1}}\n"
        let flowStart = ContinuousClock.now
        #expect(error(flow).contains("line 2: a '*' that starts a value reads as a YAML alias"))
        #expect(ContinuousClock.now - flowStart < .seconds(10))
        #expect(error("title: it's \"x\nl1: &a [1]\nl2: [*a, *a]\n# \"").contains("line 3: a '*'"))
        #expect(error("a: \"x, *y\"").contains("line 1: a '*'"))  // a false alarm, with the way out in the message
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        #expect(error("http: " + deep).contains("nested deeper than 32 levels"))
        let big = "apps: {}\n" + String(repeating: "# padding\n", count: 110_000)
        #expect(error(big).contains("larger than 1048576 bytes"))
    }

    @Test("numbers are plain decimal: YAML 1.1's octal, hexadecimal, binary and sexagesimal forms are text", arguments: [
        "1:20", "017", "0b1111", "0x1F90", "8_080", "190:0", "+80", "0o17",
    ])
    func plainNumbers(port: String) {
        #expect(error("http: {port: \(port)}").contains("http.port: expected an integer, got \"\(port)\""), "\(error("http: {port: \(port)}"))")
    }

    @Test("a long value is cut in messages")
    func boundedEcho() {
        let long = String(repeating: "x", count: 500_000)
        let message = error("http: {host: \"\(long)\"}")
        #expect(message.contains("(500000 bytes)"))
        #expect(message.utf8.count < 400)
        var environment = Self.environment
        environment["PUSHDISPATCH_HTTP_HOST"] = String(repeating: "y", count: 10_000_000)
        let fromVariable = error("", environment)
        #expect(fromVariable.contains("(10000000 bytes)"))
        #expect(fromVariable.utf8.count < 400)
    }

    @Test("bad configurations are refused with the key, the problem and what was expected", arguments: [
        ("htpp: {port: 1}", "htpp: unknown key; expected one of apps, delivery, expiry, http, ingest, instance, operations, store"),
        (
            "apps: {a: {webhooks: {w: {url: https://h/p, secret: s3cret}}}}",
            "apps.a.webhooks.w.secret: a webhook secret is \"whsec_\" followed by the base64 of at least 16 random bytes (Standard Webhooks)"
        ),
        ("http: {port: 70000}", "http.port: 70000 is out of range; expected a port: 0 to 65535"),
        ("http: {operationsToken: short}", "http.operationsToken: 5 bytes; expected at least 16 printable ASCII characters without spaces"),
        ("http: {operationsToken: \"with a space in it 0123\"}", "http.operationsToken: 23 bytes; expected at least 16 printable ASCII"),
        ("http: {port: \"80\"}", "http.port: expected an integer"),
        ("http: [1]", "http: expected a mapping of keys, got an array"),
        ("http: {host: \"\"}", "http.host: expected an IP address"),
        ("http: {host: \"300.1.1.1\"}", "http.host: expected an IP address"),
        ("http: {host: \"a_b.example\"}", "http.host: expected an IP address"),
        ("delivery: {timeout: 10}", "delivery.timeout: expected a duration such as 500ms, 10s, 5m, 2h or 7d, got 10"),
        ("delivery: {timeout: 10 s}", "delivery.timeout: expected a duration"),
        ("delivery: {timeout: 0s}", "delivery.timeout: 0s is out of range; expected 100ms to 10m"),
        ("instance: {shutdownTimeout: 500ms}", "instance.shutdownTimeout: 500ms is out of range; expected 1s to 1h"),
        ("delivery: {retry: {jitter: 2}}", "delivery.retry.jitter: 2.0 is out of range; expected 0.0 to 1.0"),
        ("delivery: {retry: {initial: 30m, window: 10m}}", "delivery.retry.initial: longer than delivery.retry.window"),
        ("delivery: {concurrency: {perApp: 0}}", "delivery.concurrency.perApp: 0 is out of range; expected 1 to 65536"),
        ("delivery: {concurrency: {perApp: 8, perDestination: 7}}", "delivery.concurrency.perDestination: 7 is more than three quarters of delivery.concurrency.perApp (6)"),
        ("http: {maxConnections: 0}", "http.maxConnections: 0 is out of range; expected 1 to 1000000"),
        ("delivery: {connectionsPerHost: 0}", "delivery.connectionsPerHost: 0 is out of range; expected 1 to 64"),
        ("delivery: {connectionsPerHost: many}", "delivery.connectionsPerHost: expected an integer"),
        ("delivery: {idleTimeout: 500ms}", "delivery.idleTimeout: 500ms is out of range; expected 1s to 1h"),
        ("delivery: {maximumOrigins: 0}", "delivery.maximumOrigins: 0 is out of range; expected 1 to 65536"),
        ("delivery: {maximumOrigins: 99999999999999999999}", "delivery.maximumOrigins: expected an integer"),
        ("delivery: {caFile: /no/such/ca.pem}", "delivery.caFile: cannot read the file \"/no/such/ca.pem\""),
        ("store: {sqlite: /tmp/a.db, postgres: postgres://x}", "store: give either sqlite or postgres, not both"),
        (
            "store: {postgres: \"postgres://u:pw@h/d?sslmode=bogus\"}",
            "store.postgres: sslmode=bogus is not known; expected disable, allow, prefer, require, verify-ca or verify-full"
        ),
        ("store: {postgres: \"postgres://u:pw@h/d?connect_timeout=5\"}", "store.postgres: unknown parameter connect_timeout; accepted: sslmode, sslrootcert"),
        (
            "store: {postgres: \"postgres://u:pw@h/d?sslmode=verify-full&sslrootcert=/no/such/ca.pem\"}",
            "store.postgres: sslrootcert=/no/such/ca.pem: cannot read it"
        ),
        ("instance: {name: \"node 1\"}", "instance.name: expected 1 to 64 characters among letters, digits"),
        ("store: {sqlite: \"\"}", "store.sqlite: expected a file path"),
        ("store: {sqlite: /no/such/folder/a.db}", "store.sqlite: the folder \"/no/such/folder\" does not exist"),
        ("ingest: {deadLetter: /no/such/folder/dl.ndjson}", "ingest.deadLetter: the folder \"/no/such/folder\" does not exist"),
        ("ingest: {socketMode: \"0680\"}", "ingest.socketMode: expected permission bits in octal, such as 0660 or 0600, got \"0680\""),
        ("ingest: {socketMode: 680}", "ingest.socketMode: expected permission bits in octal, such as 0660 or 0600, got 680"),
        ("ingest: {socketMode: true}", "ingest.socketMode: expected permission bits in octal"),
        ("ingest: {socketMode: \"rw-rw----\"}", "ingest.socketMode: expected permission bits in octal"),
        ("ingest: {socketMode: \"\"}", "ingest.socketMode: expected permission bits in octal"),
        ("ingest: {socketMode: \"4660\"}", "ingest.socketMode: 4660: only the permission bits (at most 0777) may be given"),
        ("ingest: {socketMode: \"0066\"}", "ingest.socketMode: 0066: the service's own user must keep read and write (0600 at least)"),
        ("ingest: {socketMaxConnections: 0}", "ingest.socketMaxConnections: 0 is out of range; expected 1 to 65536"),
        ("ingest: {socketIdleTimeout: 0s}", "ingest.socketIdleTimeout: 0s is out of range"),
        ("ingest: {socketMaxBuffered: 100}", "ingest.socketMaxBuffered: 100 bytes is out of range; expected 4096 to"),
        ("ingest: {socketShutdownGrace: 2h}", "ingest.socketShutdownGrace: 2h is out of range"),
        ("ingest: {deadLetterMaxSize: 64000}", "ingest.deadLetterMaxSize: 64000 bytes is out of range; expected 65536 to 1099511627776 bytes"),
        ("ingest: {deadLetterMaxSize: 1025GiB}", "ingest.deadLetterMaxSize: 1100585369600 bytes is out of range; expected 65536 to 1099511627776 bytes"),
        ("ingest: {deadLetterMaxSize: 0}", "ingest.deadLetterMaxSize: 0 bytes is out of range; expected 65536 to"),
        ("ingest: {deadLetterMaxSize: 1GB}", "ingest.deadLetterMaxSize: expected a size such as 4096, 64KiB or 1MiB, got \"1GB\""),
        ("ingest: {deadLetterMaxSize: 1.5}", "ingest.deadLetterMaxSize: expected a size such as 4096, 64KiB or 1MiB, got 1.5"),
        ("expiry: {interval: 5m}", "expiry.interval: 5m is out of range; expected at most 30s"),
        ("expiry: {interval: 0s}", "expiry.interval: 0s is out of range"),
        ("apps: {toto: {fmc: {}}}", "apps.toto.fmc: unknown key; expected one of apns, auth, fcm, harmonyos, hms, keys, pacing, rules, signingKey, subscriptions, webhooks, webpush"),
        ("apps: {toto: {auth: {}}}", "apps.toto.auth: give hs256Secret or jwks"),
        ("apps: {toto: {auth: {hs256Secret: short}}}", "apps.toto.auth.hs256Secret: 5 bytes; HS256 needs at least 32"),
        ("apps: {toto: {auth: {hs256Secret: env:NOPE}}}", "apps.toto.auth.hs256Secret: the environment variable \"NOPE\" is not set"),
        ("apps: {toto: {auth: {hs256Secret: file:/no/such/file}}}", "apps.toto.auth.hs256Secret: cannot read the secret file \"/no/such/file\""),
        ("apps: {toto: {auth: {jwks: /no/such/jwks.json}}}", "apps.toto.auth.jwks: cannot read the file"),
        ("apps: {toto: {auth: {hs256Secret: env:TOTO_AUTH_SECRET, leeway: 2h}}}", "apps.toto.auth.leeway: 2h is out of range; expected 0ms to 1h"),
        ("apps: {toto: {fcm: {endpoint: \"https://x\"}}}", "apps.toto.fcm.serviceAccountFile: missing"),
        ("apps: {toto: {fcm: {serviceAccountFile: /no/such/sa.json}}}", "apps.toto.fcm.serviceAccountFile: cannot read the file"),
        ("apps: {toto: {hms: {clientId: 1234567, clientSecret: x}}}", "apps.toto.hms.clientId: expected a string, got a number (quote it)"),
        ("apps: {toto: {hms: {clientSecret: x}}}", "apps.toto.hms.clientId: missing"),
        ("apps: {toto: {webhooks: {w: {url: ftp://x, secret: s}}}}", "apps.toto.webhooks.w.url: expected an http(s) URL such as https://host/path, got \"ftp://x\""),
        ("apps: {toto: {webhooks: {w: {url: https://x}}}}", "apps.toto.webhooks.w.secret: missing"),
        ("apps: {toto: {subscriptions: {defaultLifetime: 40d}}}", "apps.toto.subscriptions.defaultLifetime: longer than maxLifetime"),
        ("apps: {toto: {subscriptions: {maxWeight: 1MB}}}", "apps.toto.subscriptions.maxWeight: expected a size such as 4096, 64KiB or 1MiB"),
        ("apps: {toto: {subscriptions: {maxWeight: 0}}}", "apps.toto.subscriptions.maxWeight: 0 bytes is out of range"),
        ("apps: {toto: {subscriptions: {maxLifetime: 100000d}}}", "apps.toto.subscriptions.maxLifetime: 100000d is out of range"),
        ("apps: {\"a/b\": {}}", "apps.a/b: application id \"a/b\" contains '/'"),
        ("http: {port: 1}\nhttp: {port: 2}", "not valid YAML or JSON: line 1: the key \"http\" appears twice in one mapping"),
        ("- 1", "the top level must be a mapping"),
    ])
    func refused(text: String, message: String) {
        let error = error(text)
        #expect(error.contains(message), "got: \(error)")
    }

    @Test("a service-account file is read and checked at start")
    func serviceAccountChecked() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sa-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for (content, message) in [
            ("{}", "has no \"project_id\" string"),
            ("not json", "not a service-account key file"),
            (#"{"project_id":"p","client_email":"e","token_uri":"https://t","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}"#,
             "private_key is not a PEM RSA private key"),
        ] {
            let file = folder.appendingPathComponent("sa.json")
            try Data(content.utf8).write(to: file)
            let error = error("apps: {toto: {fcm: {serviceAccountFile: \(file.path)}}}")
            #expect(error.contains(message), "got: \(error)")
        }
        _ = try load("apps: {toto: {fcm: {serviceAccountFile: \(Self.serviceAccount)}}}")
    }

    @Test("replay does not check what only the REST API uses")
    func replayPurpose() throws {
        let text = "apps: {toto: {auth: {hs256Secret: short}}}"
        #expect(throws: ConfigurationError.self) { try load(text) }
        let configuration = try ConfigurationLoader.load(text: text, baseDirectory: "/tmp", environment: [:], purpose: .replay)
        #expect(configuration.apps["toto"] != nil)
    }

    @Test("environment variables that match no key are warned about; Kubernetes' service links are ignored")
    func unknownOverrides() throws {
        let configuration = try load("", ["PUSHDISPATCH_HTTP_PROT": "1", "PUSHDISPATCH_APPS_TOTO_KEYS": "k.json"])
        #expect(configuration.warnings.count == 2)
        #expect(configuration.warnings[0].hasPrefix("PUSHDISPATCH_APPS_TOTO_KEYS: no configuration key matches, so it is ignored"))
        #expect(configuration.warnings[1].hasPrefix("PUSHDISPATCH_HTTP_PROT: no configuration key matches"))
        // What Kubernetes injects for a Service named pushdispatch: no warning, no error.
        let links = [
            "PUSHDISPATCH_SERVICE_HOST": "10.0.0.11", "PUSHDISPATCH_SERVICE_PORT": "8080", "PUSHDISPATCH_SERVICE_PORT_HTTP": "8080",
            "PUSHDISPATCH_PORT": "tcp://10.0.0.11:8080", "PUSHDISPATCH_PORT_8080_TCP": "tcp://10.0.0.11:8080",
            "PUSHDISPATCH_PORT_8080_TCP_PROTO": "tcp", "PUSHDISPATCH_PORT_8080_TCP_PORT": "8080", "PUSHDISPATCH_PORT_8080_TCP_ADDR": "10.0.0.11",
        ]
        #expect(try load("", links).warnings.isEmpty)
        // Near misses are still warned about.
        #expect(try load("", ["PUSHDISPATCH_PORT_X_TCP": "1", "PUSHDISPATCH_SERVICEHOST": "h"]).warnings.count == 2)
        // A variable that does match a key is still checked.
        #expect(error("", ["PUSHDISPATCH_HTTP_PORT": "eighty"]).contains("PUSHDISPATCH_HTTP_PORT (http.port): expected an integer"))
    }

    @Test("environment variables that match several keys are refused")
    func badOverrides() {
        // "a-b" and "a_b" both spell A_B in a variable name.
        let ambiguous = "apps: {a-b: {}, a_b: {}}"
        #expect(error(ambiguous, ["PUSHDISPATCH_APPS_A_B_SIGNINGKEY": "x"]).contains(
            "PUSHDISPATCH_APPS_A_B_SIGNINGKEY: matches several keys (apps.a-b.signingKey, apps.a_b.signingKey)"))
        // Long names in the list of matches are cut.
        let long = String(repeating: "y", count: 100_000)
        let many = error("apps:\n  ? \"x-\(long)\"\n  : {}\n  ? \"x_\(long)\"\n  : {}\n", ["PUSHDISPATCH_APPS_X_\(long.uppercased())_KEYS": "k"])
        #expect(many.contains("matches several keys") && many.utf8.count < 1000, "\(many.prefix(300))")
        // One match only: "a" is an application, "a-b" another; A_B_SIGNINGKEY names a-b's key.
        let configuration = try? load("apps: {a-b: {}, a: {}}", ["PUSHDISPATCH_APPS_A_B_SIGNINGKEY": "x"])
        #expect(configuration?.apps["a-b"]?.signingKey == "x")
    }
}
