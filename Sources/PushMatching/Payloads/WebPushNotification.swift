import PushCore
import PushJSON

/// An application's notification template for Web Push (issue 34): the notification a browser
/// shows by itself, sent as a Declarative Web Push message (`"web_push": 8030`, WebKit's
/// "Meet Declarative Web Push", the W3C Push API's declarative push message) around the data
/// map the application's service worker reads (`docs/providers-2026.md`).
///
/// The payload is the data map with two members put first:
/// `{"web_push":8030,"notification":{"title":…,"body":…,"navigate":…},"s":"OK","t":"value",…}`.
/// Safari (iOS and iPadOS 18.4, macOS 18.5) shows it without a service worker; a browser
/// without declarative push hands the same JSON to the service worker, which reads the data
/// map's members as before and ignores the two it does not know.
///
/// Templates name parts of the event in braces: `{app}`, `{path}` (the subscription's path),
/// `{mode}` (`value`, `noData`, `childEvent`) and `{field}` (for `value` events, the member of
/// the new value named by ``field``: a string as is, another value as compact JSON; empty
/// otherwise). `{{` and `}}` are braces. In `navigate`, `{path}` and `{field}` are
/// percent-encoded (`/` kept in the path).
public struct WebPushNotification: Sendable, Equatable {
    public enum Part: Sendable, Equatable {
        case text(String)
        case app
        case path
        case mode
        case field
    }

    public let title: [Part]
    public let body: [Part]
    public let navigate: [Part]
    /// The member of a `value` event's new value that `{field}` stands for.
    public let field: String?
    /// `mutable`: the service worker (where there is one) may change the notification before it
    /// is shown. Default false.
    public let mutable: Bool

    /// The longest title and body sent, in bytes (longer ones are cut at a character and end
    /// with "…"): the notification stays small beside the data map it rides with.
    public static let titleBytes = 256
    public static let bodyBytes = 1_024
    /// The longest URL sent: beyond it, `navigate` is the template with `{path}` and `{field}`
    /// left out.
    public static let navigateBytes = 1_024

    public init(title: String, body: String, navigate: String, field: String? = nil, mutable: Bool = false) throws(WebPushNotificationError) {
        self.title = try Self.parse(title, member: "title")
        self.body = try Self.parse(body, member: "body")
        self.navigate = try Self.parse(navigate, member: "navigate")
        let start = Self.render(self.navigate, app: "a", path: "", mode: "value", field: "", encoding: true)
        guard start.hasPrefix("https://"), start.utf8.count > "https://".utf8.count, !start.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            throw WebPushNotificationError(member: "navigate", "expected an https:// URL without spaces (the page the notification opens)")
        }
        guard start.utf8.count <= Self.navigateBytes else {
            throw WebPushNotificationError(member: "navigate", "longer than \(Self.navigateBytes) bytes")
        }
        if let field, field.isEmpty { throw WebPushNotificationError(member: "field", "empty; name a member of the value, or leave the key out") }
        let names = [self.title, self.body, self.navigate].joined()
        if field == nil, names.contains(.field) {
            throw WebPushNotificationError(member: "field", "missing: a template uses {field}; name the member of the value it stands for")
        }
        self.field = field
        self.mutable = mutable
    }

    /// The template's parts; an unknown name or a lone brace is an error that says where.
    static func parse(_ template: String, member: String) throws(WebPushNotificationError) -> [Part] {
        var parts: [Part] = []
        var text = ""
        var rest = Substring(template)
        while let first = rest.first {
            rest = rest.dropFirst()
            if first == "{" && rest.first == "{" || first == "}" && rest.first == "}" {
                text.append(first)
                rest = rest.dropFirst()
            } else if first == "{" {
                guard let close = rest.firstIndex(of: "}") else {
                    throw WebPushNotificationError(member: member, "a { without its }; write {{ for a brace")
                }
                let name = rest[..<close]
                let part: Part
                switch name {
                case "app": part = .app
                case "path": part = .path
                case "mode": part = .mode
                case "field": part = .field
                default:
                    throw WebPushNotificationError(member: member, "{\(name.prefix(32))} is not a name; expected {app}, {path}, {mode} or {field}")
                }
                if !text.isEmpty { parts.append(.text(text)) }
                text = ""
                parts.append(part)
                rest = rest[rest.index(after: close)...]
            } else if first == "}" {
                throw WebPushNotificationError(member: member, "a } without its {; write }} for a brace")
            } else {
                text.append(first)
            }
        }
        if !text.isEmpty { parts.append(.text(text)) }
        return parts
    }

    static func render(_ parts: [Part], app: String, path: String, mode: String, field: String, encoding: Bool) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .text(let text): out += text
            case .app: out += encoding ? percentEncoded(app, keepingSlash: false) : app
            case .path: out += encoding ? percentEncoded(path, keepingSlash: true) : path
            case .mode: out += mode
            case .field: out += encoding ? percentEncoded(field, keepingSlash: false) : field
            }
        }
        return out
    }

    /// RFC 3986's unreserved characters as they are, every other byte as `%XX`.
    static func percentEncoded(_ text: String, keepingSlash: Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                bytes.append(byte)
            case UInt8(ascii: "/") where keepingSlash:
                bytes.append(byte)
            default:
                bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `text` cut to at most `limit` bytes at a character, ending with "…" when cut.
    static func bounded(_ text: String, _ limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var out = ""
        var count = 0
        let ellipsis = "…".utf8.count
        for character in text {
            let size = character.utf8.count
            if count + size > limit - ellipsis { break }
            out.append(character)
            count += size
        }
        return out + "…"
    }

    /// What `{field}` stands for in `event`.
    func fieldText(_ event: Event) -> String {
        guard let field, case .value(let value?) = event.body, let member = value[field] else { return "" }
        if let text = member.stringValue { return text }
        var writer = JSONWriter(capacity: 64)
        writer.write(member)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// Writes `{"web_push":8030,"notification":{…},` for `event`: the opening of the payload,
    /// which the data map's members (without its `{`) complete.
    public func writeOpening(for event: Event, into out: inout JSONWriter) {
        let mode = event.mode?.rawValue ?? "revoke"
        let field = fieldText(event)
        let title = Self.bounded(Self.render(title, app: event.app, path: event.path, mode: mode, field: field, encoding: false), Self.titleBytes)
        let body = Self.bounded(Self.render(body, app: event.app, path: event.path, mode: mode, field: field, encoding: false), Self.bodyBytes)
        var navigate = Self.render(navigate, app: event.app, path: event.path, mode: mode, field: field, encoding: true)
        if navigate.utf8.count > Self.navigateBytes {
            navigate = Self.render(self.navigate, app: event.app, path: "", mode: mode, field: "", encoding: true)
        }
        out.raw("{\"web_push\":8030,\"notification\":{\"title\":")
        out.writeString(title)
        out.raw(",\"body\":")
        out.writeString(body)
        out.raw(",\"navigate\":")
        out.writeString(navigate)
        if mutable { out.raw(",\"mutable\":true") }
        out.raw("},")
    }
}

/// A notification template that cannot be used: which member, and why.
public struct WebPushNotificationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let member: String
    public let reason: String

    init(member: String, _ reason: String) {
        self.member = member
        self.reason = reason
    }

    public var description: String { "\(member): \(reason)" }
}
