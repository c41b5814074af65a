import Foundation
import PushCore
import Yams

/// Reads the configuration (SPEC §9): a YAML or JSON file (JSON is YAML), then
/// `PUSHDISPATCH_*` environment variables, then validation.
public enum ConfigurationLoader {
    public static let environmentPrefix = "PUSHDISPATCH_"

    /// Loads and validates the configuration file at `path` with `environment` applied.
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws
        -> ServiceConfiguration
    {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError("cannot read the configuration file \(path)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError("\(path) is not UTF-8 text")
        }
        let base = URL(fileURLWithPath: path).standardizedFileURL.deletingLastPathComponent().path
        return try load(text: text, baseDirectory: base, environment: environment, source: path)
    }

    /// Loads and validates configuration text; relative paths resolve against `baseDirectory`.
    public static func load(text: String, baseDirectory: String, environment: [String: String], source: String = "configuration")
        throws -> ServiceConfiguration
    {
        var json = try parseYAML(text, source: source)
        try applyEnvironment(environment, to: &json)
        return try ConfigurationDecoder(baseDirectory: baseDirectory, environment: environment).decode(json)
    }

    // MARK: - YAML

    static func parseYAML(_ text: String, source: String) throws -> JSON {
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
        } catch {
            throw ConfigurationError("\(source) is not valid YAML or JSON: \(error)")
        }
        guard let node else { return .object(JSONObject()) }
        let json = try convert(node, at: "")
        guard case .object = json else {
            throw ConfigurationError("\(source): the top level must be a mapping of keys (store, http, apps, …)")
        }
        return json
    }

    static func convert(_ node: Node, at path: String) throws -> JSON {
        switch node {
        case .scalar(let scalar):
            // The tag the YAML core schema resolved (plain `9090` is an int, `"9090"` a string).
            switch node.tag.description {
            case Tag.Name.null.rawValue: return .null
            case Tag.Name.bool.rawValue: return node.bool.map(JSON.bool) ?? .string(scalar.string)
            case Tag.Name.int.rawValue: return node.int.map { JSON.int(Int64($0)) } ?? .string(scalar.string)
            case Tag.Name.float.rawValue:
                guard let value = node.float, value.isFinite else { return .string(scalar.string) }
                return .double(value)
            default: return .string(scalar.string)
            }
        case .sequence(let sequence):
            return .array(try sequence.enumerated().map { try convert($1, at: "\(path)[\($0)]") })
        case .mapping(let mapping):
            var members: [(Key, JSON)] = []
            var seen = Set<String>()
            for (keyNode, valueNode) in mapping {
                guard case .scalar(let key) = keyNode else {
                    throw ConfigurationError("\(path.isEmpty ? "top level" : path): keys must be plain strings")
                }
                let child = path.isEmpty ? key.string : "\(path).\(key.string)"
                guard seen.insert(key.string).inserted else { throw ConfigurationError("\(child): the key appears twice") }
                members.append((Key(key.string), try convert(valueNode, at: child)))
            }
            return .object(JSONObject(members))
        case .alias:
            throw ConfigurationError("\(path): YAML aliases are not supported; write the value out")
        }
    }

    // MARK: - Environment overrides

    /// Applies every `PUSHDISPATCH_<KEY_PATH>` variable: the key path in upper case, joined by
    /// `_` (`PUSHDISPATCH_HTTP_PORT`, `PUSHDISPATCH_APPS_TOTO_FCM_ENDPOINT`). Names of
    /// applications and webhooks match the ones in the file (letters and digits upper-cased,
    /// other characters as `_`). A variable that matches no key, or several, is an error.
    static func applyEnvironment(_ environment: [String: String], to json: inout JSON) throws {
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) where name.hasPrefix(environmentPrefix) {
            let tokens = name.dropFirst(environmentPrefix.count).split(separator: "_").map(String.init)
            let matches = match(tokens[...], schema: .root, json: json, path: [])
            guard matches.count == 1, let keyPath = matches.first else {
                if matches.isEmpty {
                    throw ConfigurationError(
                        "\(name): no configuration key matches; expected \(environmentPrefix) and a key path such as HTTP_PORT or APPS_<APP>_FCM_ENDPOINT")
                }
                throw ConfigurationError(
                    "\(name): matches several keys (\(matches.map { $0.joined(separator: ".") }.joined(separator: ", ")))")
            }
            json = setting(json, keyPath[...], to: scalar(value))
        }
    }

    /// The key paths that `tokens` spell below a node of `schema`.
    static func match(_ tokens: ArraySlice<String>, schema: ConfigurationSchema, json: JSON?, path: [String]) -> [[String]] {
        switch schema {
        case .leaf:
            return tokens.isEmpty ? [path] : []
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
        -> [[String]]
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

    /// A variable's value as YAML reads a scalar: `9090` is a number, `true` a boolean, an
    /// empty value null, anything else a string.
    static func scalar(_ text: String) -> JSON {
        if text.isEmpty { return .null }
        if let node = try? Yams.compose(yaml: text), case .scalar = node, let value = try? convert(node, at: "") {
            return value
        }
        return .string(text)
    }
}
