import Foundation
import PushCore
import PushDelivery
import PushJOSE

/// Turns the configuration JSON into a ``ServiceConfiguration``, checking every key. A problem
/// names the key (and the variable that set it, if one did), says what is wrong and what was
/// expected; decoding goes on after a problem, so that every problem is reported at once.
struct ConfigurationDecoder {
    let baseDirectory: String
    let environment: [String: String]
    /// Key path (`http.port`) → the `PUSHDISPATCH_*` variable that set it.
    let overrides: [String: String]

    init(baseDirectory: String, environment: [String: String], overrides: [String: String] = [:]) {
        self.baseDirectory = baseDirectory
        self.environment = environment
        self.overrides = overrides
    }

    func decode(_ json: JSON) throws -> ServiceConfiguration {
        let report = ProblemReport()
        let configuration = decode(json, report: report)
        if !report.problems.isEmpty {
            throw ConfigurationError(problems: report.problems)
        }
        return configuration
    }

    func decode(_ json: JSON, report: ProblemReport) -> ServiceConfiguration {
        let context = Section.Context(report: report, overrides: overrides, baseDirectory: baseDirectory, environment: environment)
        let root = Section(json, path: "", schema: .root, context: context)

        let storeSection = root.section("store")
        let sqlite = storeSection.path("sqlite", parentMustExist: true)
        let postgres = storeSection.postgresURL("postgres")
        let store: ServiceConfiguration.Store
        switch (sqlite, postgres) {
        case (.some, .some):
            report.add("store: give either sqlite or postgres, not both")
            store = .sqlite(path: sqlite!)
        case (_, .some(let url)):
            store = .postgres(url: url)
        case (let path, nil):
            store = .sqlite(path: path ?? storeSection.resolve("./pushdispatch.db"))
        }

        let ingestSection = root.section("ingest")
        let socket = ingestSection.path("socket", parentMustExist: true)
        if let socket, socket.utf8.count > 107 {
            report.add(
                "\(ingestSection.label("socket")): the socket path is \(socket.utf8.count) bytes; a Unix socket path is at most 107 (move it to a shorter folder)")
        }
        let ingest = ServiceConfiguration.Ingest(
            queueFile: ingestSection.path("queueFile", parentMustExist: true), socket: socket,
            deadLetter: ingestSection.path("deadLetter", parentMustExist: true) ?? ingestSection.resolve("./dead-letter.ndjson"),
            snapshotAfter: Int(ingestSection.size("snapshotAfter", range: 1...(1 << 40)) ?? 64 << 20))

        let httpSection = root.section("http")
        let http = ServiceConfiguration.HTTP(
            host: httpSection.host("host") ?? "127.0.0.1",
            port: Int(httpSection.integer("port", range: 0...65535, expected: "a port: 0 to 65535 (0 picks a free one)") ?? 8080))

        let deliverySection = root.section("delivery")
        let retrySection = deliverySection.section("retry")
        let concurrency = deliverySection.section("concurrency")
        var retry = ServiceConfiguration.Delivery.Retry(
            initial: retrySection.duration("initial", range: .milliseconds(10) ... .seconds(3600)) ?? .seconds(1),
            multiplier: retrySection.number("multiplier", range: 1...100) ?? 2,
            jitter: retrySection.number("jitter", range: 0...1) ?? 0.2,
            window: retrySection.duration("window", range: .seconds(1) ... .seconds(7 * 86_400)) ?? .seconds(7200))
        if retry.initial > retry.window {
            report.add("\(retrySection.label("initial")): longer than \(retrySection.label("window")); the first retry must fall within the window")
            retry.initial = retry.window
        }
        let delivery = ServiceConfiguration.Delivery(
            enabled: deliverySection.boolean("enabled") ?? true,
            retry: retry,
            timeout: deliverySection.duration("timeout", range: .milliseconds(100) ... .seconds(600)) ?? .seconds(10),
            perProvider: Int(concurrency.integer("perProvider", range: 1...65_536, expected: "1 to 65536") ?? 256),
            perApp: Int(concurrency.integer("perApp", range: 1...65_536, expected: "1 to 65536") ?? 64),
            caFile: deliverySection.certificateFile("caFile"))

        let expirySection = root.section("expiry")
        let expiry = ServiceConfiguration.Expiry(
            interval: expirySection.duration(
                "interval", range: .milliseconds(100) ... .seconds(30),
                why: "at most 30s, so that an expired subscription's revoke goes out within a minute") ?? .seconds(15))

        var apps: [String: AppConfiguration] = [:]
        for (name, section) in root.names("apps") {
            do {
                try AppID.validate(name, field: section.path)
            } catch {
                report.add(error.message)
                continue
            }
            apps[name] = app(name, section, report: report)
        }
        var configuration = ServiceConfiguration(
            store: store, ingest: ingest, http: http, delivery: delivery, expiry: expiry, apps: apps, baseDirectory: baseDirectory)
        let instanceSection = root.section("instance")
        if let name = instanceSection.string("name") {
            if name.utf8.count > 64 || name.isEmpty || !name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0)) }) {
                report.add("\(instanceSection.label("name")): expected 1 to 64 characters among letters, digits, '.', '_' and '-'")
            } else {
                configuration.instanceName = name
            }
        }
        if let mode = instanceSection.string("mode") {
            switch (mode, store) {
            case ("single", _):
                configuration.instanceMode = .single
            case ("shared", .postgres):
                configuration.instanceMode = .shared
            case ("shared", .sqlite):
                report.add(
                    "\(instanceSection.label("mode")): shared needs store.postgres (several instances share one PostgreSQL database); "
                        + "a SQLite store serves a single instance")
            default:
                report.add("\(instanceSection.label("mode")): expected single (this process alone on its store) or shared (one of several instances on store.postgres)")
            }
        }
        return configuration
    }

    func app(_ id: String, _ section: Section, report: ProblemReport) -> AppConfiguration {
        var auth: AppConfiguration.Auth?
        if section.has("auth") {
            let authSection = section.section("auth")
            let secret = authSection.secret("hs256Secret", category: .authentication)
            let jwks = authSection.path("jwks", mustExist: true, category: .authentication)
            switch (secret, jwks) {
            case (.some, .some):
                report.add("\(authSection.path): give either hs256Secret or jwks, not both", category: .authentication)
            case (nil, nil) where !authSection.has("hs256Secret") && !authSection.has("jwks"):
                report.add(
                    "\(authSection.path): give hs256Secret or jwks to verify the REST API's bearer tokens", category: .authentication)
            default:
                break
            }
            if let secret, secret.value.utf8.count < 32 {
                report.add(
                    "\(authSection.label("hs256Secret")): \(secret.value.utf8.count) bytes; HS256 needs at least 32 (RFC 7518 §3.2)",
                    category: .authentication)
            }
            auth = .init(
                hs256Secret: secret, jwks: jwks, issuer: authSection.nonEmptyString("issuer"),
                audience: authSection.nonEmptyString("audience"),
                leeway: authSection.duration("leeway", range: .zero ... .seconds(3600)) ?? .seconds(60))
        }
        var fcm: AppConfiguration.FCM?
        if section.has("fcm") {
            let fcmSection = section.section("fcm")
            let account = fcmSection.serviceAccountFile("serviceAccountFile")
            if account == nil && !fcmSection.has("serviceAccountFile") {
                report.add("\(fcmSection.path).serviceAccountFile: missing; the Google service-account key file of the Firebase project")
            }
            fcm = .init(
                serviceAccountFile: account ?? "", endpoint: fcmSection.url("endpoint") ?? "https://fcm.googleapis.com")
        }
        var hms: AppConfiguration.HMS?
        if section.has("hms") {
            let hmsSection = section.section("hms")
            let clientID = hmsSection.nonEmptyString("clientId")
            if clientID == nil && !hmsSection.has("clientId") {
                report.add("\(hmsSection.path).clientId: missing; the app's client ID from AppGallery Connect")
            }
            let clientSecret = hmsSection.secret("clientSecret")
            if clientSecret == nil && !hmsSection.has("clientSecret") {
                report.add("\(hmsSection.path).clientSecret: missing; the app's client secret from AppGallery Connect")
            }
            hms = .init(
                clientID: clientID ?? "", clientSecret: clientSecret ?? Secret(""),
                endpoint: hmsSection.url("endpoint") ?? "https://push-api.cloud.huawei.com",
                tokenEndpoint: hmsSection.url("tokenEndpoint") ?? "https://oauth-login.cloud.huawei.com/oauth2/v3/token")
        }
        var webhooks: [String: AppConfiguration.Webhook] = [:]
        for (name, webhookSection) in section.names("webhooks") {
            if name.isEmpty || name.utf8.count > 128 || name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                report.add("\(webhookSection.path): a webhook name is 1 to 128 bytes without control characters")
                continue
            }
            let url = webhookSection.url("url")
            if url == nil && !webhookSection.has("url") { report.add("\(webhookSection.path).url: missing; the endpoint to POST to") }
            let secret = webhookSection.secret("secret")
            if secret == nil && !webhookSection.has("secret") {
                report.add("\(webhookSection.path).secret: missing; webhooks are signed (Standard Webhooks)")
            }
            if let secret, (try? WebhookSecret(secret.value)) == nil {
                report.add("\(webhookSection.path).secret: \(WebhookSecretError().description)")
            }
            webhooks[name] = .init(url: url ?? "", secret: secret ?? Secret(""))
        }
        let lifetimes = section.section("subscriptions")
        let maxLifetime = lifetimes.duration("maxLifetime", range: .seconds(1) ... .seconds(3650 * 86_400)) ?? .seconds(30 * 86_400)
        var defaultLifetime = lifetimes.duration("defaultLifetime", range: .seconds(1) ... .seconds(3650 * 86_400)) ?? .seconds(7 * 86_400)
        if defaultLifetime > maxLifetime {
            report.add("\(lifetimes.label("defaultLifetime")): longer than maxLifetime")
            defaultLifetime = maxLifetime
        }
        let subscriptions = AppConfiguration.Subscriptions(
            defaultLifetime: defaultLifetime, maxLifetime: maxLifetime,
            maxWeight: Int(lifetimes.size("maxWeight", range: 1...(1 << 30)) ?? 1 << 20))
        return AppConfiguration(
            id: id, auth: auth, fcm: fcm, hms: hms, webhooks: webhooks, keys: section.path("keys", mustExist: true),
            signingKey: section.nonEmptyString("signingKey"), subscriptions: subscriptions)
    }
}

/// The problems found in a configuration, in the order found.
final class ProblemReport {
    enum Category: Sendable {
        case general
        /// Only the REST API uses it (`apps.*.auth`): `replay` serves no API and ignores these.
        case authentication
    }

    private(set) var entries: [(category: Category, message: String)] = []

    var problems: [String] { entries.map(\.message) }

    func add(_ message: String, category: Category = .general) {
        entries.append((category, message))
    }
}

/// One object of the configuration, with its key path, recording keys its schema lacks.
///
/// Accessors return `nil` for an absent (or `null`) key, and also for a bad value, after
/// recording the problem: the caller then uses the default and decoding goes on.
struct Section {
    /// What every section of one decoding shares.
    struct Context {
        let report: ProblemReport
        let overrides: [String: String]
        let baseDirectory: String
        let environment: [String: String]
    }

    let object: JSONObject
    let path: String
    let context: Context
    private let schemaNode: ConfigurationSchema

    init(_ json: JSON?, path: String, schema: ConfigurationSchema, context: Context) {
        self.path = path
        self.schemaNode = schema
        self.context = context
        guard let json, !json.isNull else {
            object = JSONObject()
            return
        }
        guard case .object(let object) = json else {
            context.report.add("\(path.isEmpty ? "the configuration" : path): expected a mapping of keys, got \(json.typeName)")
            self.object = JSONObject()
            return
        }
        var accepted = object
        if case .object(let keys) = schema {
            for (key, _) in object where keys[key.string] == nil {
                context.report.add(
                    "\(Section.join(path, key.string)): unknown key; expected one of \(keys.keys.sorted().joined(separator: ", "))")
                accepted.remove(key)
            }
        }
        self.object = accepted
    }

    /// `parent.key`, with a name from the input cut to a readable length.
    static func join(_ parent: String, _ key: String) -> String {
        let name = key.utf8.count > 64 ? String(decoding: JSONWriter.utf8Prefix(key.utf8, maxBytes: 64), as: UTF8.self) + "…" : key
        return parent.isEmpty ? name : "\(parent).\(name)"
    }

    func child(_ key: String) -> String { Section.join(path, key) }

    /// How messages name a key: its path, and the variable that set it, if any.
    func label(_ key: String) -> String {
        let keyPath = child(key)
        if let variable = context.overrides[keyPath] { return "\(keyPath) (set by \(variable))" }
        return keyPath
    }

    private func problem(_ key: String, _ message: String, category: ProblemReport.Category = .general) {
        context.report.add("\(label(key)): \(message)", category: category)
    }

    func has(_ key: String) -> Bool {
        guard let value = object[Key(key)] else { return false }
        return !value.isNull
    }

    func section(_ key: String) -> Section {
        guard case .object(let keys) = schemaNode, let schema = keys[key] else {
            preconditionFailure("\(key) is not in the schema at \(path)")
        }
        return Section(object[Key(key)], path: child(key), schema: schema, context: context)
    }

    /// The sections of a mapping of names (applications, webhooks).
    func names(_ key: String) -> [(String, Section)] {
        guard case .object(let keys) = schemaNode, case .names(let schema)? = keys[key] else {
            preconditionFailure("\(key) is not a mapping of names at \(path)")
        }
        let container = Section(object[Key(key)], path: child(key), schema: .leaf(.string), context: context)
        return container.object.map { name, value in
            (name.string, Section(value, path: container.child(name.string), schema: schema, context: context))
        }
    }

    func value(_ key: String) -> JSON? {
        guard let value = object[Key(key)], !value.isNull else { return nil }
        return value
    }

    func string(_ key: String) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else {
            let hint = value.typeName == "a number" || value.typeName == "a boolean" ? " (quote it)" : ""
            problem(key, "expected a string, got \(value.typeName)\(hint)")
            return nil
        }
        return text
    }

    func nonEmptyString(_ key: String) -> String? {
        guard let text = string(key) else { return nil }
        if text.isEmpty {
            problem(key, "empty; give a value or leave the key out")
            return nil
        }
        return text
    }

    func integer(_ key: String, range: ClosedRange<Int64>, expected: String) -> Int64? {
        guard let value = value(key) else { return nil }
        guard case .int(let number) = value else {
            problem(key, "expected an integer, got \(value.excerpt)")
            return nil
        }
        guard range.contains(number) else {
            problem(key, "\(number) is out of range; expected \(expected)")
            return nil
        }
        return number
    }

    func boolean(_ key: String) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else {
            problem(key, "expected true or false, got \(value.excerpt)")
            return nil
        }
        return flag
    }

    func number(_ key: String, range: ClosedRange<Double>) -> Double? {
        guard let value = value(key) else { return nil }
        let number: Double
        switch value {
        case .int(let n): number = Double(n)
        case .double(let d): number = d
        default:
            problem(key, "expected a number, got \(value.excerpt)")
            return nil
        }
        guard range.contains(number) else {
            problem(key, "\(number) is out of range; expected \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return number
    }

    func duration(_ key: String, range: ClosedRange<Duration>, why: String? = nil) -> Duration? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value, let duration = ConfigurationValues.duration(text) else {
            problem(key, "expected a duration such as 500ms, 10s, 5m, 2h or 7d, got \(value.excerpt)")
            return nil
        }
        guard range.contains(duration) else {
            problem(
                key,
                "\(text) is out of range; expected \(why ?? "\(ConfigurationValues.describe(range.lowerBound)) to \(ConfigurationValues.describe(range.upperBound))")"
            )
            return nil
        }
        return duration
    }

    func size(_ key: String, range: ClosedRange<Int64>) -> Int64? {
        guard let value = value(key) else { return nil }
        var bytes: Int64?
        if case .int(let number) = value { bytes = number }
        if case .string(let text) = value { bytes = ConfigurationValues.size(text) }
        guard let bytes else {
            problem(key, "expected a size such as 4096, 64KiB or 1MiB, got \(value.excerpt)")
            return nil
        }
        guard range.contains(bytes) else {
            problem(key, "\(bytes) bytes is out of range; expected \(range.lowerBound) to \(range.upperBound) bytes")
            return nil
        }
        return bytes
    }

    func url(_ key: String) -> String? {
        guard let text = string(key) else { return nil }
        guard text.utf8.count <= 2048, let url = URL(string: text), let scheme = url.scheme?.lowercased(),
            scheme == "https" || scheme == "http", let host = url.host, !host.isEmpty
        else {
            problem(key, "expected an http(s) URL such as https://host/path, got \(quotedString(text))")
            return nil
        }
        return text
    }

    /// A host to listen on: an IPv4 or IPv6 address or a DNS name.
    func host(_ key: String) -> String? {
        guard let text = string(key) else { return nil }
        guard ConfigurationValues.isHost(text) else {
            problem(key, "expected an IP address (127.0.0.1, 0.0.0.0, ::1) or a host name, got \(quotedString(text))")
            return nil
        }
        return text
    }

    /// A path relative to the configuration file's folder.
    func resolve(_ path: String) -> String {
        if path.hasPrefix("/") { return URL(fileURLWithPath: path).standardizedFileURL.path }
        return URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: context.baseDirectory, isDirectory: true))
            .standardizedFileURL.path
    }

    /// A file path; with `mustExist`, a readable file; with `parentMustExist`, a path whose folder
    /// exists (the service creates the file).
    func path(
        _ key: String, mustExist: Bool = false, parentMustExist: Bool = false, category: ProblemReport.Category = .general
    ) -> String? {
        guard let text = string(key) else { return nil }
        guard !text.isEmpty, !text.utf8.contains(0) else {
            problem(key, "expected a file path, got \(quotedString(text))")
            return nil
        }
        let resolved = resolve(text)
        var isDirectory: ObjCBool = false
        if mustExist {
            guard FileManager.default.fileExists(atPath: resolved, isDirectory: &isDirectory), !isDirectory.boolValue,
                FileManager.default.isReadableFile(atPath: resolved)
            else {
                problem(key, "cannot read the file \(quotedString(resolved))", category: category)
                return nil
            }
        }
        if parentMustExist {
            let folder = URL(fileURLWithPath: resolved).deletingLastPathComponent().path
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
                problem(key, "the folder \(quotedString(folder)) does not exist")
                return nil
            }
            if FileManager.default.fileExists(atPath: resolved, isDirectory: &isDirectory), isDirectory.boolValue {
                problem(key, "\(quotedString(resolved)) is a folder; expected a file path")
                return nil
            }
        }
        return resolved
    }

    /// A PEM file of one or more certificates.
    func certificateFile(_ key: String) -> String? {
        guard let file = path(key, mustExist: true) else { return nil }
        guard let data = FileManager.default.contents(atPath: file), data.count <= 1 << 20,
            String(decoding: data, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----")
        else {
            problem(key, "\(quotedString(file)) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
            return nil
        }
        return file
    }

    /// A Google service-account key file, read and checked.
    func serviceAccountFile(_ key: String) -> String? {
        guard let file = path(key, mustExist: true) else { return nil }
        guard let data = FileManager.default.contents(atPath: file), data.count <= 1 << 20 else {
            problem(key, "cannot read \(quotedString(file)) (or it is over 1 MiB)")
            return nil
        }
        do {
            _ = try ServiceAccountKey(json: [UInt8](data))
        } catch {
            problem(key, "\(quotedString(file)): \(error)")
            return nil
        }
        return file
    }

    /// A PostgreSQL URL. It holds a password: never echoed.
    func postgresURL(_ key: String) -> String? {
        guard value(key) != nil, let text = secret(key)?.value else { return nil }  // `env:NAME`, `file:PATH` or the URL
        guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://"),
            let host = URL(string: text)?.host, !host.isEmpty
        else {
            problem(key, "expected a URL such as postgres://user:password@host:5432/database (not shown: it may hold a password)")
            return nil
        }
        return text
    }

    /// A secret: `env:NAME` (from the environment), `file:PATH` (the file's contents without a
    /// final newline), or the value itself. Its value never appears in a message.
    func secret(_ key: String, category: ProblemReport.Category = .general) -> Secret? {
        guard let value = value(key) else { return nil }
        func problem(_ key: String, _ message: String) {
            self.problem(key, message, category: category)
        }
        guard case .string(let raw) = value else {
            problem(key, "expected a string (a value, env:NAME or file:PATH), got \(value.typeName)")
            return nil
        }
        var resolved: String
        if raw.hasPrefix("env:") {
            let name = String(raw.dropFirst(4))
            guard let found = context.environment[name], !found.isEmpty else {
                problem(key, "the environment variable \(quotedString(name)) is not set (or empty)")
                return nil
            }
            resolved = found
        } else if raw.hasPrefix("file:") {
            let target = resolve(String(raw.dropFirst(5)))
            guard let handle = FileHandle(forReadingAtPath: target) else {
                problem(key, "cannot read the secret file \(quotedString(target))")
                return nil
            }
            defer { try? handle.close() }
            let data = (try? handle.read(upToCount: 65_537)) ?? Data()
            guard data.count <= 65_536, let text = String(data: data, encoding: .utf8) else {
                problem(key, "the secret file \(quotedString(target)) is not UTF-8 text of at most 64 KiB")
                return nil
            }
            resolved = text
            while resolved.hasSuffix("\n") || resolved.hasSuffix("\r") { resolved.removeLast() }
        } else {
            resolved = raw
        }
        if resolved.isEmpty {
            problem(key, "the secret is empty")
            return nil
        }
        return Secret(resolved)
    }
}

/// Durations, sizes and hosts as the configuration writes them.
enum ConfigurationValues {
    /// `500ms`, `10s`, `5m`, `2h`, `7d`.
    static func duration(_ text: String) -> Duration? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (suffix, milliseconds) in units where text.hasSuffix(suffix) {
            let digits = text.dropLast(suffix.count)
            // "ms" ends in "s": only accept "s" when what precedes it is all digits.
            guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy(\.isASCIIDigit), let value = Int64(digits),
                value <= Int64.max / milliseconds
            else { continue }
            return .milliseconds(value * milliseconds)
        }
        return nil
    }

    /// A duration as the configuration would write it.
    static func describe(_ duration: Duration) -> String {
        let milliseconds = duration.wholeMilliseconds
        for (suffix, unit) in [("d", Int64(86_400_000)), ("h", 3_600_000), ("m", 60_000), ("s", 1000)]
        where milliseconds >= unit && milliseconds % unit == 0 {
            return "\(milliseconds / unit)\(suffix)"
        }
        return "\(milliseconds)ms"
    }

    /// `4096`, `64KiB`, `1MiB`, `1GiB`.
    static func size(_ text: String) -> Int64? {
        let units: [(String, Int64)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("", 1)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            let digits = text.dropLast(suffix.count)
            guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy(\.isASCIIDigit), let value = Int64(digits),
                value <= Int64.max / factor
            else { continue }
            return value * factor
        }
        return nil
    }

    /// An IPv4 or IPv6 address, or a DNS host name (RFC 1123 labels).
    static func isHost(_ text: String) -> Bool {
        if text.isEmpty || text.utf8.count > 253 { return false }
        if text.contains(":") {
            var address = in6_addr()
            return inet_pton(AF_INET6, text, &address) == 1
        }
        if text.allSatisfy({ $0.isASCIIDigit || $0 == "." }) {
            var address = in_addr()
            return inet_pton(AF_INET, text, &address) == 1
        }
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        return labels.allSatisfy { label in
            !label.isEmpty && label.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        }
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}

func quotedString(_ text: String) -> String {
    JSONWriter.quoted(text)
}
