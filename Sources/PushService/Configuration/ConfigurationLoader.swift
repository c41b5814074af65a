import Foundation
import PushCore
import PushJSON
import Yams

/// Reads the configuration (SPEC §9): a YAML or JSON file (JSON is YAML), then
/// `PUSHDISPATCH_*` environment variables, then validation.
public enum ConfigurationLoader {
    public static let environmentPrefix = "PUSHDISPATCH_"

    /// Limits on configuration text: a configuration is a few kilobytes; anything far larger is
    /// a mistake or an attack (a YAML alias bomb expands a few lines into gigabytes).
    public static let maxBytes = 1 << 20
    static let maxDepth = 32
    static let maxNodes = 100_000

    /// Loads and validates the configuration file at `path` with `environment` applied.
    public static func load(
        path: String, environment: [String: String] = ProcessInfo.processInfo.environment, purpose: ConfigurationPurpose = .service
    ) throws -> ServiceConfiguration {
        let text = try readText(path)
        let base = URL(fileURLWithPath: path).standardizedFileURL.deletingLastPathComponent().path
        return try load(text: text, baseDirectory: base, environment: environment, source: path, purpose: purpose)
    }

    /// Loads and validates configuration text; relative paths resolve against `baseDirectory`.
    /// Every problem found is reported at once (``ConfigurationError/problems``).
    public static func load(
        text: String, baseDirectory: String, environment: [String: String], source: String = "configuration",
        purpose: ConfigurationPurpose = .service
    ) throws -> ServiceConfiguration {
        var json = try parseYAML(text, source: source)
        let (overrides, unknown) = try applyEnvironment(environment, to: &json)
        let report = ProblemReport()
        let decoder = ConfigurationDecoder(baseDirectory: baseDirectory, environment: environment, overrides: overrides)
        var configuration = decoder.decode(json, report: report)
        let problems = report.entries.filter { purpose == .service || $0.category != .authentication }.map(\.problem)
        if !problems.isEmpty { throw ConfigurationError(problems: problems) }
        configuration.loadWarnings = unknown + report.warnings
        return configuration
    }

    static func readText(_ path: String) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ConfigurationError(nil, .unreadable, "cannot read the configuration file \(quotedString(path))")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: maxBytes + 1)) ?? Data()
        if data.count > maxBytes {
            throw ConfigurationError(nil, .tooLarge, "\(quotedString(path)) is larger than \(maxBytes) bytes; a configuration is a few kilobytes")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError(nil, .unreadable, "\(quotedString(path)) is not UTF-8 text")
        }
        return text
    }

    // MARK: - YAML

    static func parseYAML(_ text: String, source: String) throws -> JSON {
        if text.utf8.count > maxBytes {
            throw ConfigurationError(nil, .tooLarge, "\(source) is larger than \(maxBytes) bytes; a configuration is a few kilobytes")
        }
        // Aliases must be refused before Yams composes the document: composing hashes complex
        // keys, which an alias bomb makes exponential.
        if let line = firstAnchorOrAlias(text) {
            throw ConfigurationError(
                source, .invalid, "line \(line): a '*' that starts a value reads as a YAML alias (*name); aliases and anchors are not "
                    + "supported: write the value out (a '*' right after ', ', ': ', '- ', '[' or '{' in a text is taken for one too: rephrase it)")
        }
        // The parser owns the anchors: nodes refer to them weakly, so it stays alive while the
        // tree is converted (an anchored node is how an alias shows).
        let parser: Parser
        let node: Node?
        do {
            parser = try Parser(yaml: text)
            node = try parser.singleRoot()
        } catch let error as YamlError {
            throw ConfigurationError(nil, .invalid, "\(source) is not valid YAML or JSON: \(describe(error))")
        } catch {
            throw ConfigurationError(nil, .invalid, "\(source) is not valid YAML or JSON")
        }
        guard let node else { return .object(JSONObject()) }
        var budget = maxNodes
        let json = try withExtendedLifetime(parser) { try convert(node, at: "", depth: 0, budget: &budget) }
        guard case .object = json else {
            throw ConfigurationError(source, .invalid, "the top level must be a mapping of keys (store, http, apps, …)")
        }
        return json
    }

    /// The line (from 1) of the first possible YAML alias (`*name`), found lexically and
    /// soundly: an alias can only start a node, so its `*` follows, on its line, nothing but
    /// white space, or one of `[ { , : - ?`. Every such `*` is taken for an alias, whatever
    /// quotes or comments surround it: a false alarm (a `*` right after `, ` inside a quoted
    /// text) gets a clear message; a missed alias could hang the process (Yams hashes the keys it
    /// composes, and an alias bomb as a key makes that exponential). Without aliases, composing
    /// is linear; anchors are then refused on the composed nodes.
    static func firstAnchorOrAlias(_ text: String) -> Int? {
        var line = 1
        var previous: UInt8? = nil  // last character other than space or tab on this line
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\n"):
                line += 1
                previous = nil
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                continue
            case UInt8(ascii: "*"):
                switch previous {
                case nil, UInt8(ascii: "["), UInt8(ascii: "{"), UInt8(ascii: ","), UInt8(ascii: ":"), UInt8(ascii: "-"), UInt8(ascii: "?"):
                    return line
                default:
                    previous = byte
                }
            default:
                previous = byte
            }
        }
        return nil
    }

    /// A YAML error as line, column and problem: never the text around it, which may hold
    /// secrets.
    static func describe(_ error: YamlError) -> String {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _), .composer(_, let problem, let mark, _):
            return "line \(mark.line), column \(mark.column): \(problem)"
        case .reader(let problem, let offset, _, _):
            return "\(problem)\(offset.map { " at character \($0)" } ?? "")"
        case .duplicatedKeysInMapping(let duplicates, let context):
            let keys = duplicates.sorted().map { quotedString($0) }.joined(separator: ", ")
            return "line \(context.mark.line): the key \(keys) appears twice in one mapping"
        case .memory:
            return "out of memory"
        case .dataCouldNotBeDecoded:
            return "not UTF-8 text"
        default:
            return "unreadable"
        }
    }

    static func convert(_ node: Node, at path: String, depth: Int, budget: inout Int) throws -> JSON {
        budget -= 1
        if budget < 0 {
            throw ConfigurationError(nil, .tooLarge, "the configuration has more than \(maxNodes) values; a configuration is a few kilobytes")
        }
        if depth > maxDepth {
            throw ConfigurationError(path, .tooLarge, "nested deeper than \(maxDepth) levels")
        }
        if node.anchor != nil {
            throw ConfigurationError(
                path.isEmpty ? "the top level" : path, .invalid, "YAML anchors and aliases (&name, *name) are not supported; write the value out")
        }
        switch node {
        case .scalar(let scalar):
            // The tag the YAML core schema resolved (plain `9090` is an int, `"9090"` a string).
            switch node.tag.description {
            case Tag.Name.null.rawValue: return .null
            case Tag.Name.bool.rawValue: return node.bool.map(JSON.bool) ?? .string(scalar.string)
            // Only plain decimal numbers are numbers: YAML 1.1 also reads 017 (octal), 0x1F90,
            // 0b1111, 8_080 and 1:20 (sexagesimal, 80) as integers, and those would silently
            // mean something else than they look like; they stay text (and a key that wants a
            // number says so).
            case Tag.Name.int.rawValue:
                guard isPlainDecimal(scalar.string, fraction: false), let value = Int64(scalar.string) else { return .string(scalar.string) }
                return .int(value)
            case Tag.Name.float.rawValue:
                guard isPlainDecimal(scalar.string, fraction: true), let value = Double(scalar.string), value.isFinite else {
                    return .string(scalar.string)
                }
                return .double(value)
            default: return .string(scalar.string)
            }
        case .sequence(let sequence):
            return .array(try sequence.enumerated().map { try convert($1, at: "\(path)[\($0)]", depth: depth + 1, budget: &budget) })
        case .mapping(let mapping):
            var members: [(Key, JSON)] = []
            var seen = Set<String>()
            for (keyNode, valueNode) in mapping {
                guard case .scalar(let key) = keyNode, keyNode.anchor == nil else {
                    throw ConfigurationError(path.isEmpty ? "top level" : path, .invalid, "keys must be plain strings")
                }
                let child = Section.join(path, key.string)
                guard seen.insert(key.string).inserted else { throw ConfigurationError(child, .invalid, "the key appears twice") }
                members.append((Key(key.string), try convert(valueNode, at: child, depth: depth + 1, budget: &budget)))
            }
            return .object(JSONObject(members))
        case .alias:
            throw ConfigurationError(path, .invalid, "YAML anchors and aliases (&name, *name) are not supported; write the value out")
        }
    }

    /// `-?digits`, without leading zeros; with `fraction`, also `digits.digits` and an exponent.
    static func isPlainDecimal(_ text: String, fraction: Bool) -> Bool {
        var bytes = Array(text.utf8)[...]
        if bytes.first == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
        let isDigit: (UInt8) -> Bool = { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        let integer = bytes.prefix(while: isDigit)
        guard !integer.isEmpty, integer.count == 1 || integer.first != UInt8(ascii: "0") else { return false }
        var rest = bytes.dropFirst(integer.count)
        if !fraction { return rest.isEmpty }
        if rest.first == UInt8(ascii: ".") {
            let digits = rest.dropFirst().prefix(while: isDigit)
            guard !digits.isEmpty else { return false }
            rest = rest.dropFirst(1 + digits.count)
        }
        if rest.first == UInt8(ascii: "e") || rest.first == UInt8(ascii: "E") {
            rest = rest.dropFirst()
            if rest.first == UInt8(ascii: "-") || rest.first == UInt8(ascii: "+") { rest = rest.dropFirst() }
            let digits = rest.prefix(while: isDigit)
            guard !digits.isEmpty else { return false }
            rest = rest.dropFirst(digits.count)
        }
        return rest.isEmpty
    }

    // MARK: - Environment overrides

    /// Applies every `PUSHDISPATCH_<KEY_PATH>` variable: the key path in upper case, joined by
    /// `_` (`PUSHDISPATCH_HTTP_PORT`, `PUSHDISPATCH_APPS_TOTO_FCM_ENDPOINT`). Names of
    /// applications and webhooks match the ones in the file (letters and digits upper-cased,
    /// other characters as `_`). A variable that matches several keys is an error.
    ///
    /// A variable that matches no key does not stop the service: the names Kubernetes gives a
    /// Service called `pushdispatch` (``isServiceLink(_:)``) are ignored, any other is returned
    /// as a warning (a typo, or a variable meant for something else).
    ///
    /// The value is the variable's exact text, converted to the key's type (an integer for
    /// `http.port`, text for a secret, …) and then validated like the file's values; an empty
    /// value is an error. Returns the variable that set each key path (`http.port`), so that
    /// messages name it, and the warnings.
    static func applyEnvironment(_ environment: [String: String], to json: inout JSON) throws -> (
        overrides: [String: String], warnings: [String]
    ) {
        var overrides: [String: String] = [:]
        var warnings: [String] = []
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) where name.hasPrefix(environmentPrefix) {
            let label = String(name.prefix(JSONWriter.excerptBytes))
            let tokens = name.dropFirst(environmentPrefix.count).split(separator: "_").map(String.init)
            let matches = match(tokens[...], schema: .root, json: json, path: [])
            guard matches.count == 1, let (keyPath, kind) = matches.first else {
                if matches.isEmpty {
                    if isServiceLink(name) { continue }
                    warnings.append(
                        "\(label): no configuration key matches, so it is ignored; a setting is \(environmentPrefix) and a key path "
                            + "such as HTTP_PORT or APPS_<APP>_FCM_ENDPOINT")
                    continue
                }
                let keys = matches.prefix(4).map { match in match.0.reduce("") { Section.join($0, $1) } }
                throw ConfigurationError(label, .conflict, "matches several keys (\(keys.joined(separator: ", "))\(matches.count > 4 ? ", …" : ""))")
            }
            let key = keyPath.joined(separator: ".")
            json = setting(json, keyPath[...], to: try overrideValue(value, kind: kind, variable: label, key: key))
            overrides[key] = label
        }
        return (overrides, warnings)
    }

    /// Whether `name` is one of the variables Kubernetes injects for a Service named
    /// `pushdispatch` (`PUSHDISPATCH_SERVICE_HOST`, `PUSHDISPATCH_SERVICE_PORT[_NAME]`,
    /// `PUSHDISPATCH_PORT`, `PUSHDISPATCH_PORT_8080_TCP[_PROTO|_PORT|_ADDR]`): they are not
    /// settings, and a pod of that Service always has them.
    static func isServiceLink(_ name: String) -> Bool {
        let rest = name.dropFirst(environmentPrefix.count)
        if rest == "SERVICE_HOST" || rest == "SERVICE_PORT" || rest.hasPrefix("SERVICE_PORT_") || rest == "PORT" { return true }
        let parts = rest.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 3 || parts.count == 4, parts[0] == "PORT", !parts[1].isEmpty, parts[1].allSatisfy(\.isNumber),
            ["TCP", "UDP", "SCTP"].contains(parts[2])
        else { return false }
        return parts.count == 3 || ["PROTO", "PORT", "ADDR"].contains(parts[3])
    }

    /// A variable's text as a value of the key's type. Never echoes a secret.
    static func overrideValue(_ text: String, kind: ConfigurationValueKind, variable: String, key: String) throws -> JSON {
        if text.isEmpty {
            throw ConfigurationError(nil, .invalid, "\(variable) is set but empty; give it the value of \(key), or unset it")
        }
        switch kind {
        case .integer:
            guard let number = Int64(text) else {
                throw ConfigurationError("\(variable) (\(key))", .invalid, "expected an integer, got \(quotedString(text))")
            }
            return .int(number)
        case .number:
            guard text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") || $0 == UInt8(ascii: ".") }),
                let number = Double(text), number.isFinite
            else {
                throw ConfigurationError("\(variable) (\(key))", .invalid, "expected a decimal number such as 2 or 0.2, got \(quotedString(text))")
            }
            return .double(number)
        case .boolean:
            switch text {
            case "true": return .bool(true)
            case "false": return .bool(false)
            default: throw ConfigurationError("\(variable) (\(key))", .invalid, "expected true or false, got \(quotedString(text))")
            }
        case .string, .duration, .size, .secret, .rate:
            return .string(text)
        case .list:
            return .array(text.split(separator: ",", omittingEmptySubsequences: false).map { .string($0.trimmingCharacters(in: .whitespaces)) })
        }
    }

    /// The key paths (and value kinds) that `tokens` spell below a node of `schema`.
    static func match(_ tokens: ArraySlice<String>, schema: ConfigurationSchema, json: JSON?, path: [String])
        -> [([String], ConfigurationValueKind)]
    {
        switch schema {
        case .leaf(let kind):
            return tokens.isEmpty ? [(path, kind)] : []
        case .object(let keys):
            return keys.flatMap { key, child in
                matchKey(key, tokens, child, json?[key], path)
            }
        case .names(let child):
            guard case .object(let object)? = json else { return [] }
            return object.flatMap { key, value in
                matchKey(key.string, tokens, child, value, path)
            }
        }
    }

    static func matchKey(_ key: String, _ tokens: ArraySlice<String>, _ schema: ConfigurationSchema, _ json: JSON?, _ path: [String])
        -> [([String], ConfigurationValueKind)]
    {
        let keyTokens = environmentTokens(key)
        guard !keyTokens.isEmpty, tokens.starts(with: keyTokens) else { return [] }
        return match(tokens.dropFirst(keyTokens.count), schema: schema, json: json, path: path + [key])
    }

    /// A key as it appears in a variable name: letters and digits upper-cased, split on the rest.
    static func environmentTokens(_ key: String) -> [String] {
        key.uppercased().split { !($0.isLetter || $0.isNumber) || !$0.isASCII }.map(String.init)
    }

    static func setting(_ json: JSON, _ keyPath: ArraySlice<String>, to value: JSON) -> JSON {
        guard let first = keyPath.first else { return value }
        let object = json.objectValue ?? JSONObject()
        return .object(object.setting(Key(first), to: setting(object[Key(first)] ?? .null, keyPath.dropFirst(), to: value)))
    }
}
