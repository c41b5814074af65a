import PushCore
import PushJSON

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
            throw RequestError(.invalid, "path \(quoted(pathText)): \(error)")
        }
        let format = try reader.enumeration("format", PayloadFormat.self) ?? .v2
        let content: Content
        if let reasonValue = reader.value("revoke") {
            guard case .string(let reasonText) = reasonValue, let reason = RevokeReason(rawValue: reasonText) else {
                throw RequestError(.invalid, "revoke: expected one of \(RevokeReason.allCases.map { quoted($0.rawValue) }.joined(separator: ", ")), got \(reasonValue.excerpt)"
                )
            }
            for field in ["mode", "before", "after"] where reader.value(field) != nil {
                throw RequestError(.invalid, "\(field): a revoke request carries no \(field); remove it or the revoke field")
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
                throw RequestError(.invalid, "\(field): only v2 payloads are signed or encrypted; this request asks for format v1")
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
            throw RequestError(.invalid, "\(field): \(error)")
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
