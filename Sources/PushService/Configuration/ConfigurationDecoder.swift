import Foundation
import PushCore

/// Turns the configuration JSON into a ``ServiceConfiguration``, checking every key: errors
/// name the key, say what is wrong and what was expected.
struct ConfigurationDecoder {
    let baseDirectory: String
    let environment: [String: String]

    func decode(_ json: JSON) throws -> ServiceConfiguration {
        let root = try Section(json, path: "", schema: .root)

        let storeSection = try root.section("store")
        let sqlite = try storeSection.string("sqlite")
        let postgres = try storeSection.string("postgres")
        let store: ServiceConfiguration.Store
        switch (sqlite, postgres) {
        case (.some, .some):
            throw ConfigurationError("store: give either sqlite or postgres, not both")
        case (_, .some(let url)):
            store = .postgres(url: url)
        case (let path, nil):
            store = .sqlite(path: file(path ?? "./pushdispatch.db"))
        }

        let ingestSection = try root.section("ingest")
        let ingest = ServiceConfiguration.Ingest(
            queueFile: try ingestSection.string("queueFile").map(file), socket: try ingestSection.string("socket").map(file),
            deadLetter: file(try ingestSection.string("deadLetter") ?? "./dead-letter.ndjson"))

        let httpSection = try root.section("http")
        let port = try httpSection.integer("port") ?? 8080
        guard (0...65535).contains(port) else {
            throw ConfigurationError("http.port: \(port) is not a port; expected 0 to 65535 (0 picks a free one)")
        }
        let http = ServiceConfiguration.HTTP(host: try httpSection.string("host") ?? "127.0.0.1", port: Int(port))

        let deliverySection = try root.section("delivery")
        let retrySection = try deliverySection.section("retry")
        let concurrency = try deliverySection.section("concurrency")
        let delivery = ServiceConfiguration.Delivery(
            retry: .init(
                initial: try retrySection.duration("initial") ?? .seconds(1),
                multiplier: try retrySection.number("multiplier", range: 1...100) ?? 2,
                jitter: try retrySection.number("jitter", range: 0...1) ?? 0.2,
                window: try retrySection.duration("window") ?? .seconds(7200)),
            timeout: try deliverySection.duration("timeout") ?? .seconds(10),
            perProvider: Int(try concurrency.integer("perProvider", minimum: 1) ?? 256),
            perApp: Int(try concurrency.integer("perApp", minimum: 1) ?? 64),
            caFile: try deliverySection.string("caFile").map(file))

        let expirySection = try root.section("expiry")
        let expiry = ServiceConfiguration.Expiry(interval: try expirySection.duration("interval") ?? .seconds(15))
        if expiry.interval > .seconds(30) {
            throw ConfigurationError("expiry.interval: at most 30s, so that an expired subscription's revoke goes out within a minute")
        }

        var apps: [String: AppConfiguration] = [:]
        for (name, section) in try root.names("apps") {
            do {
                try AppID.validate(name, field: "apps.\(name)")
            } catch {
                throw ConfigurationError(error.message)
            }
            apps[name] = try app(name, section)
        }
        return ServiceConfiguration(
            store: store, ingest: ingest, http: http, delivery: delivery, expiry: expiry, apps: apps, baseDirectory: baseDirectory)
    }

    func app(_ id: String, _ section: Section) throws -> AppConfiguration {
        var auth: AppConfiguration.Auth?
        if section.has("auth") {
            let authSection = try section.section("auth")
            let secret = try authSection.secret("hs256Secret", resolve: resolve)
            let jwks = try authSection.string("jwks").map(file)
            switch (secret, jwks) {
            case (.some, .some):
                throw ConfigurationError("\(authSection.path): give either hs256Secret or jwks, not both")
            case (nil, nil):
                throw ConfigurationError("\(authSection.path): give hs256Secret or jwks to verify the REST API's bearer tokens")
            default:
                break
            }
            if let secret, secret.value.utf8.count < 32 {
                throw ConfigurationError(
                    "\(authSection.path).hs256Secret: \(secret.value.utf8.count) bytes; HS256 needs at least 32 (RFC 7518 §3.2)")
            }
            auth = .init(
                hs256Secret: secret, jwks: jwks, issuer: try authSection.string("issuer"), audience: try authSection.string("audience"),
                leeway: try authSection.duration("leeway") ?? .seconds(60))
        }
        var fcm: AppConfiguration.FCM?
        if section.has("fcm") {
            let fcmSection = try section.section("fcm")
            guard let account = try fcmSection.string("serviceAccountFile") else {
                throw ConfigurationError("\(fcmSection.path).serviceAccountFile: missing; the Google service-account key file")
            }
            fcm = .init(
                serviceAccountFile: file(account), endpoint: try fcmSection.url("endpoint") ?? "https://fcm.googleapis.com")
        }
        var hms: AppConfiguration.HMS?
        if section.has("hms") {
            let hmsSection = try section.section("hms")
            guard let clientID = try hmsSection.string("clientId") else {
                throw ConfigurationError("\(hmsSection.path).clientId: missing")
            }
            guard let clientSecret = try hmsSection.secret("clientSecret", resolve: resolve) else {
                throw ConfigurationError("\(hmsSection.path).clientSecret: missing")
            }
            hms = .init(
                clientID: clientID, clientSecret: clientSecret,
                endpoint: try hmsSection.url("endpoint") ?? "https://push-api.cloud.huawei.com",
                tokenEndpoint: try hmsSection.url("tokenEndpoint") ?? "https://oauth-login.cloud.huawei.com/oauth2/v3/token")
        }
        var webhooks: [String: AppConfiguration.Webhook] = [:]
        for (name, webhookSection) in try section.names("webhooks") {
            guard let url = try webhookSection.url("url") else { throw ConfigurationError("\(webhookSection.path).url: missing") }
            guard let secret = try webhookSection.secret("secret", resolve: resolve) else {
                throw ConfigurationError("\(webhookSection.path).secret: missing; webhooks are signed (Standard Webhooks)")
            }
            webhooks[name] = .init(url: url, secret: secret)
        }
        let lifetimes = try section.section("subscriptions")
        let subscriptions = AppConfiguration.Subscriptions(
            defaultLifetime: try lifetimes.duration("defaultLifetime") ?? .seconds(7 * 86_400),
            maxLifetime: try lifetimes.duration("maxLifetime") ?? .seconds(30 * 86_400),
            maxWeight: Int(try lifetimes.size("maxWeight") ?? 1 << 20))
        if subscriptions.defaultLifetime > subscriptions.maxLifetime {
            throw ConfigurationError("\(lifetimes.path).defaultLifetime: longer than maxLifetime")
        }
        if subscriptions.defaultLifetime < .seconds(1) {
            throw ConfigurationError("\(lifetimes.path).defaultLifetime: at least 1s")
        }
        return AppConfiguration(
            id: id, auth: auth, fcm: fcm, hms: hms, webhooks: webhooks, keys: try section.string("keys").map(file),
            signingKey: try section.string("signingKey"), subscriptions: subscriptions)
    }

    /// A path relative to the configuration file's folder.
    func file(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        return URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: baseDirectory, isDirectory: true)).standardizedFileURL.path
    }

    /// A secret: `env:NAME` (from the environment), `file:PATH` (the file's contents without a
    /// final newline), or the value itself.
    func resolve(_ raw: String, at path: String) throws -> Secret {
        if raw.hasPrefix("env:") {
            let name = String(raw.dropFirst(4))
            guard let value = environment[name], !value.isEmpty else {
                throw ConfigurationError("\(path): the environment variable \(name) is not set")
            }
            return Secret(value)
        }
        if raw.hasPrefix("file:") {
            let target = file(String(raw.dropFirst(5)))
            guard let data = FileManager.default.contents(atPath: target), var value = String(data: data, encoding: .utf8) else {
                throw ConfigurationError("\(path): cannot read the secret file \(target)")
            }
            while value.hasSuffix("\n") || value.hasSuffix("\r") { value.removeLast() }
            return Secret(value)
        }
        return Secret(raw)
    }
}

/// One object of the configuration, with its key path, refusing keys its schema lacks.
struct Section {
    let object: JSONObject
    let path: String

    init(_ json: JSON?, path: String, schema: ConfigurationSchema) throws {
        self.path = path
        self.schemaNode = schema
        guard let json, !json.isNull else {
            object = JSONObject()
            return
        }
        guard case .object(let object) = json else {
            throw ConfigurationError("\(path.isEmpty ? "the configuration" : path): expected a mapping of keys, got \(json.typeName)")
        }
        if case .object(let keys) = schema {
            for (key, _) in object where keys[key.string] == nil {
                throw ConfigurationError(
                    "\(path.isEmpty ? "" : path + ".")\(key.string): unknown key; expected one of \(keys.keys.sorted().joined(separator: ", "))")
            }
        }
        self.object = object
    }

    private let schemaNode: ConfigurationSchema

    func child(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func has(_ key: String) -> Bool {
        guard let value = object[Key(key)] else { return false }
        return !value.isNull
    }

    func section(_ key: String) throws -> Section {
        guard case .object(let keys) = schemaNode, let schema = keys[key] else {
            preconditionFailure("\(key) is not in the schema at \(path)")
        }
        return try Section(object[Key(key)], path: child(key), schema: schema)
    }

    /// The sections of a mapping of names (applications, webhooks).
    func names(_ key: String) throws -> [(String, Section)] {
        guard case .object(let keys) = schemaNode, case .names(let schema)? = keys[key] else {
            preconditionFailure("\(key) is not a mapping of names at \(path)")
        }
        let container = try Section(object[Key(key)], path: child(key), schema: .leaf)
        return try container.object.map { name, value in
            (name.string, try Section(value, path: container.child(name.string), schema: schema))
        }
    }

    func value(_ key: String) -> JSON? {
        guard let value = object[Key(key)], !value.isNull else { return nil }
        return value
    }

    func string(_ key: String) throws -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else {
            let hint = value.typeName == "a number" ? " (quote it)" : ""
            throw ConfigurationError("\(child(key)): expected a string, got \(value.typeName)\(hint)")
        }
        return text
    }

    func integer(_ key: String, minimum: Int64 = .min) throws -> Int64? {
        guard let value = value(key) else { return nil }
        guard case .int(let number) = value else {
            throw ConfigurationError("\(child(key)): expected an integer, got \(value)")
        }
        guard number >= minimum else { throw ConfigurationError("\(child(key)): at least \(minimum), got \(number)") }
        return number
    }

    func number(_ key: String, range: ClosedRange<Double>) throws -> Double? {
        guard let value = value(key) else { return nil }
        let number: Double
        switch value {
        case .int(let n): number = Double(n)
        case .double(let d): number = d
        default: throw ConfigurationError("\(child(key)): expected a number, got \(value)")
        }
        guard range.contains(number) else {
            throw ConfigurationError("\(child(key)): \(number) is out of range; expected \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    func duration(_ key: String) throws -> Duration? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value, let duration = ConfigurationValues.duration(text) else {
            throw ConfigurationError("\(child(key)): expected a duration such as 500ms, 10s, 5m, 2h or 7d, got \(value)")
        }
        return duration
    }

    func size(_ key: String) throws -> Int64? {
        guard let value = value(key) else { return nil }
        if case .int(let bytes) = value, bytes >= 0 { return bytes }
        guard case .string(let text) = value, let size = ConfigurationValues.size(text) else {
            throw ConfigurationError("\(child(key)): expected a size such as 4096, 64KiB or 1MiB, got \(value)")
        }
        return size
    }

    func url(_ key: String) throws -> String? {
        guard let text = try string(key) else { return nil }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http",
            url.host != nil
        else {
            throw ConfigurationError("\(child(key)): expected an http(s) URL, got \(quotedString(text))")
        }
        return text
    }

    func secret(_ key: String, resolve: (String, String) throws -> Secret) throws -> Secret? {
        guard let value = value(key) else { return nil }
        guard case .string(let raw) = value else {
            throw ConfigurationError("\(child(key)): expected a string (a value, env:NAME or file:PATH), got \(value.typeName)")
        }
        return try resolve(raw, child(key))
    }
}

/// Durations and sizes as the configuration writes them.
enum ConfigurationValues {
    /// `500ms`, `10s`, `5m`, `2h`, `7d`.
    static func duration(_ text: String) -> Duration? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (suffix, milliseconds) in units where text.hasSuffix(suffix) {
            let digits = text.dropLast(suffix.count)
            // "ms" ends in "s": only accept "s" when what precedes it is all digits.
            guard !digits.isEmpty, digits.allSatisfy(\.isASCIIDigit), let value = Int64(digits), value <= Int64.max / milliseconds
            else { continue }
            return .milliseconds(value * milliseconds)
        }
        return nil
    }

    /// `4096`, `64KiB`, `1MiB`, `1GiB`.
    static func size(_ text: String) -> Int64? {
        let units: [(String, Int64)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("", 1)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            let digits = text.dropLast(suffix.count)
            guard !digits.isEmpty, digits.allSatisfy(\.isASCIIDigit), let value = Int64(digits), value <= Int64.max / factor
            else { continue }
            return value * factor
        }
        return nil
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}

func quotedString(_ text: String) -> String {
    JSONWriter.quoted(text)
}
