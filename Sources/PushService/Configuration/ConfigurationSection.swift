import Foundation
import PushCore
import PushJSON
import PushJOSE
import PushStore

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
            context.report.add(path.isEmpty ? "the configuration" : path, .invalid, "expected a mapping of keys, got \(json.typeName)")
            self.object = JSONObject()
            return
        }
        var accepted = object
        if case .object(let keys) = schema {
            for (key, _) in object where keys[key.string] == nil {
                context.report.add(
                    Section.join(path, key.string), .unknownKey, "unknown key; expected one of \(keys.keys.sorted().joined(separator: ", "))")
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
        context.report.add(label(key), .invalid, message, category: category)
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

    /// A list of non-empty strings (YAML sequence), at most `limit` of them.
    func list(_ key: String, limit: Int = 256) -> [String]? {
        guard let value = value(key) else { return nil }
        guard case .array(let items) = value else {
            problem(key, "expected a list of strings, got \(value.excerpt)")
            return nil
        }
        guard items.count <= limit else {
            problem(key, "\(items.count) entries; at most \(limit)")
            return nil
        }
        var strings: [String] = []
        for item in items {
            guard case .string(let text) = item, !text.isEmpty else {
                problem(key, "expected a list of non-empty strings, found \(item.excerpt)")
                return nil
            }
            strings.append(text)
        }
        return strings
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

    /// A send rate in sends per second (`200/s`, `600000/min`, `50000/h`), 0 for `off`; at
    /// least 1/s and at most 1,000,000/s when not off.
    func rate(_ key: String) -> Double? {
        guard let value = value(key) else { return nil }
        // YAML 1.1 reads a bare `off` as false (Yams does): that is the `off` a user wrote.
        if case .bool(false) = value { return 0 }
        guard case .string(let text) = value, let rate = ConfigurationValues.rate(text) else {
            problem(key, "expected a rate such as 200/s, 600000/min or 50000/h, or off, got \(value.excerpt)")
            return nil
        }
        guard rate == 0 || (1...1_000_000).contains(rate) else {
            problem(key, "\(text) is out of range; expected 1/s (60/min) to 1000000/s, or off")
            return nil
        }
        return rate
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

    /// Permission bits written in octal, as chmod takes them: `0660`, `660`, `"0o600"`. The
    /// digits are read as octal whatever YAML made of them (the loader keeps `0660` as text; `660`
    /// is a number whose digits are taken). Set-user, set-group and sticky bits are refused (a
    /// socket has no use for them).
    func fileMode(_ key: String) -> UInt16? {
        guard let value = value(key) else { return nil }
        let text: String
        switch value {
        case .string(let string): text = string
        case .int(let number): text = String(number)
        default:
            problem(key, "expected permission bits in octal, such as 0660 or 0600, got \(value.excerpt)")
            return nil
        }
        var digits = Substring(text)
        if digits.hasPrefix("0o") { digits = digits.dropFirst(2) }
        guard (1...4).contains(digits.count), digits.allSatisfy({ ("0"..."7").contains($0) }), let mode = UInt16(digits, radix: 8) else {
            problem(key, "expected permission bits in octal, such as 0660 or 0600, got \(value.excerpt)")
            return nil
        }
        guard mode <= 0o777 else {
            problem(key, "\(text): only the permission bits (at most 0777) may be given; set-user, set-group and sticky bits are refused")
            return nil
        }
        guard mode & 0o600 == 0o600 else {
            problem(key, "\(text): the service's own user must keep read and write (0600 at least)")
            return nil
        }
        return mode
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

    /// Warns when a file holding a secret may be read by the file's group or by others: the
    /// service reads it as it is (a Kubernetes Secret volume is 0644 unless its `defaultMode`
    /// says otherwise), but says how to close it.
    func warnIfShared(_ key: String, file: String) {
        var info = stat()
        guard stat(file, &info) == 0, info.st_mode & 0o044 != 0 else { return }
        context.report.warn(
            "\(label(key)): the file \(quotedString(file)) holds a secret and its group or others may read it (mode "
                + "\(String(info.st_mode & 0o777, radix: 8))); run chmod 600 \(file) (in Kubernetes: defaultMode: 0400)")
    }

    /// A service-account key file, read and checked: Google's (FCM), or with `harmony`
    /// AppGallery Connect's (Push Kit v3).
    func serviceAccountFile(_ key: String, harmony: Bool = false) -> String? {
        guard let file = path(key, mustExist: true) else { return nil }
        warnIfShared(key, file: file)
        guard let data = FileManager.default.contents(atPath: file), data.count <= 1 << 20 else {
            problem(key, "cannot read \(quotedString(file)) (or it is over 1 MiB)")
            return nil
        }
        do {
            if harmony {
                _ = try HarmonyServiceAccount(json: [UInt8](data))
            } else {
                _ = try ServiceAccountKey(json: [UInt8](data))
            }
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
        if let tlsProblem = PostgresStore.tlsProblem(url: text) {
            problem(key, tlsProblem)
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
            warnIfShared(key, file: target)
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
