/// Data payload formats.
public enum PayloadFormat: String, Sendable, CaseIterable {
    case v1
    case v2
}

/// The `encryption` block of a subscription or payload request (SPEC §7.3). Checked against
/// the supported algorithms by PushJOSE.
public struct EncryptionSpec: Sendable, Equatable {
    /// Key management algorithm: `dir`, `A128KW`, `A256KW`, `ECDH-ES`, `ECDH-ES+A256KW`,
    /// `RSA-OAEP-256`.
    public var alg: String
    /// Content encryption: `A256GCM` (default) or `A128GCM`.
    public var enc: String
    /// Key id: of the application's symmetric key, or of the device's public key.
    public var kid: String?
    /// The device's public key (JWK), for asymmetric algorithms.
    public var jwk: JSON?

    public static let defaultContentEncryption = "A256GCM"

    public init(alg: String, enc: String = EncryptionSpec.defaultContentEncryption, kid: String? = nil, jwk: JSON? = nil) {
        self.alg = alg
        self.enc = enc
        self.kid = kid
        self.jwk = jwk
    }

    /// Reads an `encryption` object; `field` names it in errors.
    public static func decode(_ json: JSON, field: String) throws(RequestError) -> EncryptionSpec {
        let reader = try FieldReader(json, name: field, allowed: ["alg", "enc", "kid", "jwk"])
        let alg = try reader.requiredString("alg")
        let enc = try reader.optionalString("enc") ?? defaultContentEncryption
        let kid = try reader.optionalString("kid")
        var jwk: JSON?
        if let value = reader.value("jwk"), !value.isNull {
            guard case .object = value else {
                throw RequestError("\(field).jwk: expected a JWK object, got \(value.typeName)")
            }
            jwk = value
        }
        return EncryptionSpec(alg: alg, enc: enc, kid: kid, jwk: jwk)
    }
}

/// One request line of `pushdispatch payload` (SPEC §7.5).
public struct PayloadRequest: Sendable {
    public enum Content: Sendable {
        /// A data event: the values at the path before and after (tree-normalised).
        case data(mode: Mode, before: JSON?, after: JSON?)
        case revoke(RevokeReason)
    }

    public var app: String
    public var path: Path
    public var format: PayloadFormat
    public var content: Content
    /// v2: the kid of the signing key.
    public var signing: String?
    /// v2: encryption of `evt`.
    public var encryption: EncryptionSpec?

    static let fields = ["app", "path", "mode", "format", "before", "after", "revoke", "signing", "encryption"]

    /// Reads a request from its JSON.
    public static func decode(_ json: JSON) throws(RequestError) -> PayloadRequest {
        let reader = try FieldReader(json, name: "request", allowed: fields)
        let app = try reader.requiredString("app")
        try AppID.validate(app, field: "app")
        let pathText = try reader.requiredString("path")
        let path: Path
        do {
            path = try Path(pathText)
        } catch {
            throw RequestError("path \(quoted(pathText)): \(error)")
        }
        let format = try reader.enumeration("format", PayloadFormat.self) ?? .v2
        let content: Content
        if let reasonValue = reader.value("revoke") {
            guard case .string(let reasonText) = reasonValue, let reason = RevokeReason(rawValue: reasonText) else {
                throw RequestError(
                    "revoke: expected one of \(RevokeReason.allCases.map { quoted($0.rawValue) }.joined(separator: ", ")), got \(reasonValue.excerpt)"
                )
            }
            for field in ["mode", "before", "after"] where reader.value(field) != nil {
                throw RequestError("\(field): a revoke request carries no \(field); remove it or the revoke field")
            }
            content = .revoke(reason)
        } else {
            let mode = try reader.enumeration("mode", Mode.self) ?? .noData
            let before = try treeValue(reader.value("before"), field: "before", at: path)
            let after = try treeValue(reader.value("after"), field: "after", at: path)
            content = .data(mode: mode, before: before, after: after)
        }
        let signing = try reader.optionalString("signing")
        var encryption: EncryptionSpec?
        if let value = reader.value("encryption"), !value.isNull {
            encryption = try EncryptionSpec.decode(value, field: "encryption")
        }
        if format == .v1 {
            for field in ["signing", "encryption"] where reader.value(field) != nil && !(reader.value(field)!.isNull) {
                throw RequestError("\(field): only v2 payloads are signed or encrypted; this request asks for format v1")
            }
        }
        return PayloadRequest(
            app: app, path: path, format: format, content: content, signing: signing, encryption: encryption)
    }

    private static func treeValue(_ value: JSON?, field: String, at path: Path) throws(RequestError) -> JSON? {
        guard let value else { return nil }
        do {
            return try value.treeNormalized(at: path)
        } catch {
            throw RequestError("\(field): \(error)")
        }
    }

    /// The event this request describes. An unchanged value or an empty diff still gives an
    /// event: the command always prints a payload.
    public var event: Event {
        switch content {
        case .revoke(let reason):
            return Event(app: app, path: path.string, body: .revoke(reason))
        case .data(let mode, let before, let after):
            switch mode {
            case .noData: return Event(app: app, path: path.string, body: .noData)
            case .value: return Event(app: app, path: path.string, body: .value(after))
            case .childEvent:
                return Event(app: app, path: path.string, body: .childEvent(ChildDiff(before: before, after: after)))
            }
        }
    }
}

/// Application ids (SPEC §11.2): 1 to 128 bytes, no `/`, no control characters.
public enum AppID {
    public static let maxBytes = 128

    public static func validate(_ app: String, field: String) throws(RequestError) {
        let count = app.utf8.count
        if count == 0 { throw RequestError("\(field): an application id may not be empty") }
        if count > maxBytes {
            throw RequestError("\(field): application id is \(count) bytes; the maximum is \(maxBytes)")
        }
        if app.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "/") }) {
            throw RequestError("\(field): application id \(quoted(app)) contains '/' or a control character")
        }
    }
}

/// A request that cannot be served, with a message saying what and where.
public struct RequestError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// Reads the fields of a JSON object with uniform error messages.
public struct FieldReader {
    public let object: JSONObject
    public let name: String

    /// - Parameter allowed: the field names accepted; any other is an error.
    public init(_ json: JSON, name: String, allowed: [String]) throws(RequestError) {
        guard case .object(let object) = json else {
            throw RequestError("\(name): expected a JSON object, got \(json.typeName)")
        }
        for (key, _) in object where !allowed.contains(key.string) {
            throw RequestError(
                "\(name): unknown field \(quoted(key.string)); expected only \(allowed.map(quoted).joined(separator: ", "))")
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
            throw RequestError("\(label(field)): missing; expected a string")
        }
        guard case .string(let text) = value else {
            throw RequestError("\(label(field)): expected a string, got \(value.typeName)")
        }
        return text
    }

    public func optionalString(_ field: String) throws(RequestError) -> String? {
        guard let value = value(field), !value.isNull else { return nil }
        guard case .string(let text) = value else {
            throw RequestError("\(label(field)): expected a string, got \(value.typeName)")
        }
        return text
    }

    /// A string field naming one case of `E`; `nil` when absent or `null`.
    public func enumeration<E: RawRepresentable & CaseIterable>(_ field: String, _ type: E.Type) throws(RequestError) -> E?
    where E.RawValue == String {
        guard let value = value(field), !value.isNull else { return nil }
        let expected = E.allCases.map { quoted($0.rawValue) }.joined(separator: ", ")
        guard case .string(let text) = value, let result = E(rawValue: text) else {
            throw RequestError("\(label(field)): expected one of \(expected), got \(value.excerpt)")
        }
        return result
    }
}
