import PushJSON

/// Reads the fields of a JSON object with uniform error messages.
public struct FieldReader {
    public let object: JSONObject
    public let name: String

    /// - Parameter allowed: the field names accepted; any other is an error.
    public init(_ json: JSON, name: String, allowed: [String]) throws(RequestError) {
        guard case .object(let object) = json else {
            throw RequestError(.invalid, "\(name): expected a JSON object, got \(json.typeName)")
        }
        for (key, _) in object where !allowed.contains(key.string) {
            throw RequestError(.invalid, "\(name): unknown field \(quoted(key.string)); expected only \(allowed.map(quoted).joined(separator: ", "))")
        }
        self.object = object
        self.name = name
    }

    public func value(_ field: String) -> JSON? {
        object[Key(field)]
    }

    private func label(_ field: String) -> String {
        name == "request" ? field : "\(name).\(field)"
    }

    public func requiredString(_ field: String) throws(RequestError) -> String {
        guard let value = value(field), !value.isNull else {
            throw RequestError(.missing, "\(label(field)): missing; expected a string")
        }
        guard case .string(let text) = value else {
            throw RequestError(.invalid, "\(label(field)): expected a string, got \(value.typeName)")
        }
        return text
    }

    public func optionalString(_ field: String) throws(RequestError) -> String? {
        guard let value = value(field), !value.isNull else { return nil }
        guard case .string(let text) = value else {
            throw RequestError(.invalid, "\(label(field)): expected a string, got \(value.typeName)")
        }
        return text
    }

    /// A string field naming one case of `E`; `nil` when absent or `null`.
    public func enumeration<E: RawRepresentable & CaseIterable>(_ field: String, _ type: E.Type) throws(RequestError) -> E?
    where E.RawValue == String {
        guard let value = value(field), !value.isNull else { return nil }
        let expected = E.allCases.map { quoted($0.rawValue) }.joined(separator: ", ")
        guard case .string(let text) = value, let result = E(rawValue: text) else {
            throw RequestError(.invalid, "\(label(field)): expected one of \(expected), got \(value.excerpt)")
        }
        return result
    }
}
