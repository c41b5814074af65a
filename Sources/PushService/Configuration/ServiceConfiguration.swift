import Foundation
import PushContracts
import PushCore
import PushHTTP
import PushIngest
import PushJSON
import PushMatching

/// The service's configuration (SPEC §9), validated. Every field has a default, listed with
/// it; `ConfigurationLoader` reads it from a YAML or JSON file and `PUSHDISPATCH_*` variables.
public struct ServiceConfiguration: Sendable {
    public enum Store: Sendable, Equatable {
        /// Default `./pushdispatch.db`.
        case sqlite(path: String)
        case postgres(url: String)
    }

    public struct Ingest: Sendable, Equatable {
        /// `ingest.queueFile`: a change-record file to tail. Default none.
        public var queueFile: String?
        /// `ingest.socket`: a Unix socket to accept records on. Default none.
        public var socket: String?
        /// `ingest.deadLetter`. Default `./dead-letter.ndjson`.
        public var deadLetter: String
        /// `ingest.deadLetterMaxSize`: past this many bytes the dead-letter file is renamed to
        /// `<deadLetter>.1` (replacing an older one) and a new one is started. Default 1 GiB.
        public var deadLetterMaxSize: Int = DeadLetterFile.defaultMaxSize
        /// `ingest.maxRecordBytes`: the longest change-record line accepted, from either source;
        /// a longer one is dead-lettered with reason `too_long` (SPEC §13.3). A line is held whole
        /// while it is read. Default 16 MiB; 64 KiB to 1 GiB.
        public var maxRecordBytes: Int = 16 << 20
        /// `ingest.snapshotAfter`: an application's tree is snapshotted once this many bytes of its
        /// records were journalled since the last snapshot. Default 64 MiB.
        public var snapshotAfter: Int = 64 << 20
        /// `ingest.socketMode`, `socketMaxConnections`, `socketIdleTimeout`, `socketMaxBuffered`,
        /// `socketShutdownGrace`: see ``SocketLimits`` for each default.
        public var socketLimits = SocketLimits()
    }

    /// How this process uses its store (`instance.mode`).
    public enum InstanceMode: String, Sendable, Equatable {
        /// This process alone: it processes every record and sends every notification.
        case single
        /// One of several instances sharing a PostgreSQL store: records go through a shared
        /// inbox to the owner of their application's lease; delivery is shared by claims.
        case shared
    }

    public struct HTTP: Sendable, Equatable {
        /// `http.host`. Default `127.0.0.1`.
        public var host: String
        /// `http.port`. Default 8080; 0 picks a free port (it is logged).
        public var port: Int
        /// `http.operationsToken`: when set, `/metrics` and `/status` answer only requests with
        /// `Authorization: Bearer <token>` (at least 16 bytes). Default none: they are open on a
        /// loopback `host` and refused (403) on any other.
        public var operationsToken: Secret? = nil
        /// `http.maxConnections`: connections open at once; one more is answered 503 and closed.
        /// Default 512 (below the usual 1,024 file descriptors of a process, which the store,
        /// the sources and the providers' connections share).
        public var maxConnections: Int = 512

        /// Whether `host` is a loopback address (`localhost`, 127.0.0.0/8, `::1`, or 127/8
        /// mapped into IPv6). A name other than `localhost` is not: what it resolves to may change.
        public var isLoopback: Bool {
            let name = host.lowercased()
            if name == "localhost" { return true }
            guard let address = AddressClass.literal(name) else { return false }
            switch address.count {
            case 4: return address[0] == 127
            case 16:
                if address[0..<15].allSatisfy({ $0 == 0 }) && address[15] == 1 { return true }
                return address[0..<12].elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) && address[12] == 127
            default: return false
            }
        }
    }

    public struct Delivery: Sendable, Equatable {
        public struct Retry: Sendable, Equatable {
            /// Default 1s.
            public var initial: Duration
            /// Default 2.
            public var multiplier: Double
            /// Default 0.2 (±20 %).
            public var jitter: Double
            /// Default 2h.
            public var window: Duration
        }

        /// `delivery.enabled`: `false` runs ingestion only, notifications waiting in the outbox
        /// (maintenance, or a stand-by instance). Default true.
        public var enabled: Bool
        public var retry: Retry
        /// `delivery.timeout` per request. Default 10s.
        public var timeout: Duration
        /// `delivery.concurrency.perProvider`. Default 1024 (HTTP/2 carries many at once per
        /// connection; see docs/decisions.md, issue 23).
        public var perProvider: Int
        /// `delivery.concurrency.perApp`. Default 512: one application reaches FCM's default quota
        /// (10,000 a second) with answers ~50 ms away (docs/decisions.md).
        public var perApp: Int
        /// `delivery.concurrency.perDestination`: sends at once to one webhook or one push
        /// service's origin. Default half of `perApp`, at most 128; at most three quarters of it (what all
        /// destinations together may hold: the last quarter is kept for FCM, HMS and APNs).
        public var perDestination: Int? = nil
        /// `delivery.caFile`: extra trusted CA certificates (PEM). Default none.
        public var caFile: String?
        /// `delivery.connectionsPerHost`: HTTP/2 connections to each provider host (each
        /// carries many requests at once). Default 6: FCM takes ~100 streams a connection, six
        /// carry `perApp`'s 512.
        public var connectionsPerHost: Int = 6
        /// `delivery.idleTimeout`: an HTTP/2 connection with no request for this long is
        /// closed. Default 60s.
        public var idleTimeout: Duration = .seconds(60)
        /// `delivery.maximumOrigins`: HTTP/2 origins (host and port) held at once per transport;
        /// the least recently used idle one makes room for a new one. Default 1024.
        public var maximumOrigins: Int = 1_024
        /// `delivery.pacing`: send-rate budgets (issue 34).
        public var pacing = Pacing()
    }

    /// `delivery.pacing`: each application's senders' budgets, by kind (sends per second; 0 or
    /// absent: not paced), and the bounds of a quota answer's `Retry-After`.
    public struct Pacing: Sendable, Equatable {
        /// Default: FCM 600000/min (its default quota per project); the others not paced.
        public var byKind: [SubscriptionKind: Double] = [.fcm: 600_000.0 / 60]
        /// `retryAfterMinimum` (default 1s) and `retryAfterMaximum` (default 60s).
        public var retryAfterMinimum: Duration = .seconds(1)
        public var retryAfterMaximum: Duration = .seconds(60)

        public init() {}
    }

    public struct Expiry: Sendable, Equatable {
        /// `expiry.interval`: how often expired subscriptions are swept. Default 15s (SPEC
        /// §11.9 asks for at least every 30 s).
        public var interval: Duration
    }

    /// `operations`: what the operator's view keeps (SPEC §13).
    public struct Operations: Sendable, Equatable {
        /// `operations.history.maxAge` (default 7d) and `operations.history.maxRows` (default
        /// 1,000,000): how long and how much delivery history is kept; `0` for either turns it
        /// off.
        public var history = HistoryLimits()
    }

    public var store: Store
    public var ingest: Ingest
    public var operations = Operations()
    public var http: HTTP
    public var delivery: Delivery
    public var expiry: Expiry
    /// `instance.name`: this instance's name among several on one PostgreSQL store (its
    /// delivery claims and its leases are filed under it; a name a live instance holds is
    /// refused). Default: unique to this process, `<host name>-<process id>`.
    public var instanceName: String = Self.processName
    /// Whether `instance.name` was set (else ``instanceName`` is this process's own).
    public var instanceNamePinned = false

    /// The default instance name: the host name and the process id, so that processes started
    /// without a name on one host never share one (a name is cut to 64 characters).
    static var processName: String {
        let pid = "-\(ProcessInfo.processInfo.processIdentifier)"
        let host = String(ProcessInfo.processInfo.hostName.unicodeScalars.filter {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0))
        }.prefix(64 - pid.count))
        return (host.isEmpty ? "pushdispatch" : host) + pid
    }

    /// What a queue file's checkpoint is filed under on PostgreSQL: the pinned `instance.name`,
    /// else the host name (a queue file is a file of one machine, read again by the process
    /// that restarts there).
    public var machineName: String { instanceNamePinned ? instanceName : ProcessInfo.processInfo.hostName }
    /// `instance.mode`: `single` or `shared`. Default: `single` on SQLite, `shared` on
    /// PostgreSQL (several instances may join; `single` there refuses to share the database).
    public var instanceMode: InstanceMode
    /// `instance.shutdownTimeout`: how long a graceful stop (SIGTERM, SIGINT) may take: the
    /// sends in flight answered, what was taken in committed. Past it, what is left is
    /// cancelled (a write held up by an unreachable store is given up: its records were not
    /// acknowledged and are sent again by their clients) and `run` exits with a failure.
    /// Default 60 s.
    public var shutdownTimeout: Duration = .seconds(60)
    /// By application id.
    public var apps: [String: AppConfiguration]
    /// The folder relative paths were resolved against (the configuration file's).
    public var baseDirectory: String
    /// Found while loading (see ``warnings``): `PUSHDISPATCH_*` variables that set nothing,
    /// secret files their group or others may read.
    public var loadWarnings: [String] = []

    public init(
        store: Store, ingest: Ingest, http: HTTP, delivery: Delivery, expiry: Expiry, apps: [String: AppConfiguration], baseDirectory: String
    ) {
        self.store = store
        self.ingest = ingest
        self.http = http
        self.delivery = delivery
        self.expiry = expiry
        self.apps = apps
        self.baseDirectory = baseDirectory
        switch store {
        case .sqlite: instanceMode = .single
        case .postgres: instanceMode = .shared
        }
    }
}

/// A secret value: never printed or logged.
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public let value: String

    public init(_ value: String) {
        self.value = value
    }

    public var description: String { "<secret>" }
    public var debugDescription: String { "<secret>" }
}

/// One application's configuration (`apps.<id>`).
public struct AppConfiguration: Sendable, Equatable {
    public struct Auth: Sendable, Equatable {
        /// `hs256Secret`: verify REST tokens with this secret (its UTF-8 bytes, at least 32).
        public var hs256Secret: Secret?
        /// `jwks`: or with the keys of this JWK Set file.
        public var jwks: String?
        /// `issuer`, `audience`: required `iss` / `aud` when set. Default none.
        public var issuer: String?
        public var audience: String?
        /// `leeway` on `exp` / `nbf`. Default 60s.
        public var leeway: Duration
    }

    public struct FCM: Sendable, Equatable {
        /// `serviceAccountFile`: the Google service-account key (its `token_uri` is used for OAuth).
        public var serviceAccountFile: String
        /// `endpoint`. Default `https://fcm.googleapis.com`.
        public var endpoint: String
    }

    public struct HMS: Sendable, Equatable {
        public var clientID: String
        public var clientSecret: Secret
        /// Default `https://push-api.cloud.huawei.com`.
        public var endpoint: String
        /// Default `https://oauth-login.cloud.huawei.com/oauth2/v3/token`.
        public var tokenEndpoint: String
    }

    /// `harmonyos`: Push Kit v3 for HarmonyOS 5 and later (issue 34).
    public struct HarmonyOS: Sendable, Equatable {
        /// `serviceAccountFile`: the AppGallery Connect service-account key file (JSON: project,
        /// key id, sub-account, RSA private key); read and checked at start.
        public var serviceAccountFile: String
        /// `endpoint`. Default `https://push-api.cloud.huawei.com`.
        public var endpoint: String
    }

    public struct Webhook: Sendable, Equatable {
        public var url: String
        /// Standard Webhooks signing secret.
        public var secret: Secret
        /// `pacing`: its send-rate budget (sends per second; 0: `off`). Default: the
        /// application's or `delivery.pacing.webhook`.
        public var pacing: Double? = nil
    }

    /// `apns`: Apple's push service, directly, with token-based authentication.
    public struct APNs: Sendable, Equatable {
        public enum Environment: String, Sendable, Equatable {
            case production, sandbox

            /// Apple's host for the environment.
            public var endpoint: String {
                switch self {
                case .production: "https://api.push.apple.com"
                case .sandbox: "https://api.sandbox.push.apple.com"
                }
            }
        }

        /// `teamId`: the Apple developer team's 10-character id.
        public var teamID: String
        /// `keyId`: the 10-character id of the APNs authentication key.
        public var keyID: String
        /// `privateKey`: the key's `.p8` file text (write `file:AuthKey_XXXXXXXXXX.p8`).
        public var privateKey: Secret
        /// `topic`: the app's bundle id.
        public var topic: String
        /// `environment`: production (default) or sandbox (development builds' tokens).
        public var environment: Environment
        /// `endpoint`: default Apple's host for `environment`.
        public var endpoint: String
    }

    /// `webpush`: browsers, through their push services (RFC 8030, 8291, 8292).
    public struct WebPush: Sendable, Equatable {
        /// `vapidPrivateKey`: the application server's P-256 key (PEM, or base64url raw).
        public var vapidPrivateKey: Secret
        /// `subject`: a `mailto:` or `https:` contact the push services may reach.
        public var subject: String
        /// `allowedHosts`: push-service host names a browser subscription may name (`*.` for a
        /// domain's names). Default none: any public host.
        public var allowedHosts: [String]?
        /// `allowPrivateAddresses`: allow endpoints on loopback, private and reserved
        /// addresses. Default false (tests with local fakes only).
        public var allowPrivateAddresses: Bool
        /// `notification`: the notification the browser shows, sent as a Declarative Web Push
        /// message around the data map (`title`, `body`, `navigate`, `field`, `mutable`).
        /// Default none: the data map alone.
        public var notification: WebPushNotification?
    }

    public struct Subscriptions: Sendable, Equatable {
        /// Default 7d.
        public var defaultLifetime: Duration
        /// Default 30d.
        public var maxLifetime: Duration
        /// Default 1MiB.
        public var maxWeight: Int
        /// `maxPerUser`: subscriptions one user may hold in the application; a create past it
        /// is answered 429 `too_many_subscriptions`. Default 100.
        public var maxPerUser: Int = 100

        public var lifetimes: SubscriptionLifetimes {
            SubscriptionLifetimes(defaultLifetime: defaultLifetime.components.seconds, maxLifetime: maxLifetime.components.seconds)
        }
    }

    public var id: String
    /// Default none: then no REST request of this application is accepted.
    public var auth: Auth?
    public var fcm: FCM?
    public var hms: HMS?
    /// Default none.
    public var harmonyos: HarmonyOS? = nil
    public var apns: APNs?
    public var webpush: WebPush?
    /// By name. Default none.
    public var webhooks: [String: Webhook]
    /// `pacing`: the application's send-rate budgets (sends per second; 0: `off`), over
    /// `delivery.pacing`. Default none.
    public var pacing: [SubscriptionKind: Double] = [:]
    /// `keys`: JWK Set file of signing keys and symmetric encryption keys. Default none.
    public var keys: String?
    /// `signingKey`: kid in `keys`. Default none: the service's own ES256 key signs.
    public var signingKey: String?
    public var subscriptions: Subscriptions
    /// `rules`: the read rules (SPEC §12), from a file or inline. Default none: every
    /// authenticated client may read every node (`{"rules": {".read": "auth != null"}}`), said
    /// as a warning.
    public var rules: ConfiguredRules?

    /// The rules in force: the configured ones, or the default.
    public var readRules: ReadRules { rules?.rules ?? .authenticated }
}

/// An application's configured read rules.
public struct ConfiguredRules: Sendable, Equatable {
    /// Largest rules file.
    public static let maxFileBytes = 1 << 20

    /// The file they come from, or `inline`.
    public var source: String
    /// The rules document as read.
    public var document: JSON
    public var rules: ReadRules

    public static func == (lhs: ConfiguredRules, rhs: ConfiguredRules) -> Bool {
        lhs.source == rhs.source && lhs.document == rhs.document
    }
}

/// Rules that cannot be used. `source` is the file a faulty rule is in; ``described(at:)``
/// puts the key or option first (`apps.toto.rules (./rules.json): rules/a/.read, column 3: …`).
public struct RulesProblem: Error, Sendable {
    public var source: String?
    public var message: String

    public func described(at subject: String) -> String {
        source.map { "\(subject) (\($0)): \(message)" } ?? "\(subject): \(message)"
    }
}

extension ConfiguredRules {
    /// The rules document `document`, from `source` (a file, or `inline`).
    static func parse(_ document: JSON, source: String) throws(RulesProblem) -> ConfiguredRules {
        do {
            return ConfiguredRules(source: source, document: document, rules: try ReadRules.parse(document))
        } catch {
            throw RulesProblem(source: source == "inline" ? nil : source, message: error.description)
        }
    }

    /// Reads and parses a rules file (JSON, at most ``maxFileBytes``): what `run`, `config
    /// check` and `rules check --rules` read.
    public static func load(file: String) throws(RulesProblem) -> ConfiguredRules {
        guard let data = FileManager.default.contents(atPath: file), data.count <= maxFileBytes else {
            throw RulesProblem(message: "the rules file \(quotedString(file)) cannot be read or is larger than 1 MiB")
        }
        let document: JSON
        do {
            document = try JSONParser.parseRejectingDuplicateKeys([UInt8](data))
        } catch {
            throw RulesProblem(message: "the rules file \(quotedString(file)) is not JSON: \(error)")
        }
        return try parse(document, source: file)
    }
}

extension ServiceConfiguration {
    /// What the operator should know but that does not stop the service: `PUSHDISPATCH_*`
    /// variables that match no key, secret files others may read, applications without read
    /// rules.
    public var warnings: [String] {
        loadWarnings + apps.keys.sorted().compactMap { id in
            apps[id]?.rules == nil
                ? "apps.\(id).rules: none configured; every authenticated client may read (and subscribe to) every node, as with "
                    + "{\"rules\": {\".read\": \"auth != null\"}}"
                : nil
        }
    }
}

/// A configuration that cannot be used: every problem found, each with the key it is about,
/// its kind (compare with the static members) and what is wrong and what was expected.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What sort of problem, as a closed set (a stable name each).
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Code: String {
            case missing
            case invalid
            case unknownKey = "unknown_key"
            case conflict
            case tooLarge = "too_large"
            case unreadable
            case inUse = "in_use"
        }

        private let code: Code

        private init(_ code: Code) { self.code = code }

        /// A required key is absent.
        public static let missing = Kind(.missing)
        /// A value of the wrong type, out of range or in the wrong form; a file that does not
        /// hold what the key says (a key, a JWK Set, rules).
        public static let invalid = Kind(.invalid)
        /// A key the schema does not have (a typo must not silently mean "default").
        public static let unknownKey = Kind(.unknownKey)
        /// Keys that contradict each other (both of two alternatives, one duration longer than
        /// the one bounding it, two applications sharing a token key).
        public static let conflict = Kind(.conflict)
        /// A file or a document over its bound.
        public static let tooLarge = Kind(.tooLarge)
        /// A file that cannot be read, or is not text.
        public static let unreadable = Kind(.unreadable)
        /// The store is used by other processes in a way this configuration cannot share
        /// (`instance.mode`).
        public static let inUse = Kind(.inUse)

        /// The kind's stable name (`unknown_key`).
        public var description: String { code.rawValue }
    }

    /// One problem: the key it is about, as messages name it (`apps.toto.fcm.serviceAccountFile`,
    /// with `(set by PUSHDISPATCH_…)` when a variable set it; `nil` when it is about the file
    /// or no one key), and the message.
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        public let key: String?
        public let kind: Kind
        public let message: String

        public init(key: String?, kind: Kind, message: String) {
            self.key = key
            self.kind = kind
            self.message = message
        }

        /// `key: message`, or the message alone.
        public var description: String { key.map { "\($0): \(message)" } ?? message }
    }

    /// Every problem found, in the order found.
    public let problems: [Problem]

    public init(_ key: String?, _ kind: Kind, _ message: String) {
        self.problems = [Problem(key: key, kind: kind, message: message)]
    }

    public init(problems: [Problem]) {
        self.problems = problems
    }

    /// The problems, one per line.
    public var description: String {
        problems.map(\.description).joined(separator: "\n")
    }
}

/// What a configuration is loaded for: `run` checks everything; `replay` serves no REST API,
/// so it does not check `apps.*.auth` (which it never uses).
public enum ConfigurationPurpose: Sendable {
    case service
    case replay
}
