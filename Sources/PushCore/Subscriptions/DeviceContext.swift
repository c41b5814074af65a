import PushJSON

/// An APNs device token as a subscription's `context` carries it: hexadecimal text.
///
/// Apple's tokens are 32 bytes today (64 hexadecimal digits), and Apple says not to count on
/// that length: 8 to 100 bytes are accepted. Upper-case digits are written in lower case, so
/// that one device is one subscription tuple whatever the app's formatting.
public enum APNsDeviceToken {
    public static let minimumBytes = 8
    public static let maximumBytes = 100

    /// The token in canonical form (lower-case hexadecimal), or what is wrong with it.
    public static func canonical(_ text: String) throws(RequestError) -> String {
        let bytes = Array(text.utf8)
        guard bytes.allSatisfy(isHexDigit) else {
            throw RequestError(.invalid, "context: an APNs device token is hexadecimal text (0-9, a-f); found another character")
        }
        guard bytes.count % 2 == 0, (minimumBytes * 2...maximumBytes * 2).contains(bytes.count) else {
            throw RequestError(.invalid, "context: an APNs device token is \(minimumBytes * 2) to \(maximumBytes * 2) hexadecimal digits, an even number "
                    + "(\(minimumBytes) to \(maximumBytes) bytes; 64 digits for today's tokens); got \(bytes.count) digits")
        }
        return String(decoding: bytes.map { (0x41...0x46).contains($0) ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }
}

/// A browser's push subscription (`PushSubscription.toJSON()`): the push resource's URL and the
/// keys its messages are encrypted to (RFC 8291). A `webpush` subscription's `context` is its
/// canonical JSON text, `{"endpoint":…,"keys":{"auth":…,"p256dh":…}}`, so that one browser
/// subscription is one subscription tuple whatever member order or extra members
/// (`expirationTime`) the browser wrote.
///
/// The shape is checked here; that the keys are a P-256 point and a 16-byte secret, and that
/// the endpoint is a push service the application accepts, is checked where the cryptography
/// and the configuration are (PushDelivery, PushService).
public struct WebPushContext: Sendable, Equatable {
    /// The push resource: an absolute URL.
    public var endpoint: String
    /// The browser's P-256 public key, base64url (`keys.p256dh`).
    public var p256dh: String
    /// The browser's authentication secret, base64url (`keys.auth`).
    public var auth: String

    /// Longest endpoint URL accepted, in bytes (real ones are 150 to 500).
    public static let maxEndpointBytes = 2_048

    public init(endpoint: String, p256dh: String, auth: String) {
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
    }

    /// Reads a `PushSubscription` given as a JSON object, or as the text of one.
    public init(_ value: JSON) throws(RequestError) {
        var object = value
        if case .string(let text) = value {
            guard let parsed = try? JSONParser.parse(Array(text.utf8)) else {
                throw RequestError(.invalid, "context: a webpush context is the browser's PushSubscription as JSON (an object, or its text); the text is not JSON")
            }
            object = parsed
        }
        let reader = try FieldReader(object, name: "context", allowed: ["endpoint", "expirationTime", "keys"])
        let endpoint = try reader.requiredString("endpoint")
        guard endpoint.utf8.count <= Self.maxEndpointBytes else {
            throw RequestError(.tooLarge, "context.endpoint: \(endpoint.utf8.count) bytes; at most \(Self.maxEndpointBytes)")
        }
        guard let keysValue = reader.value("keys"), !keysValue.isNull else {
            throw RequestError(.missing, "context.keys: missing; expected {\"p256dh\": …, \"auth\": …} from PushSubscription.toJSON()")
        }
        let keys = try FieldReader(keysValue, name: "context.keys", allowed: ["p256dh", "auth"])
        let p256dh = try keys.requiredString("p256dh")
        let auth = try keys.requiredString("auth")
        for (name, key) in [("p256dh", p256dh), ("auth", auth)] where key.utf8.count > 256 {
            throw RequestError(.tooLarge, "context.keys.\(name): \(key.utf8.count) bytes; a base64url key of at most 256")
        }
        self.init(endpoint: endpoint, p256dh: p256dh, auth: auth)
    }

    /// Reads a stored `context` (the canonical text).
    public init(context: String) throws(RequestError) {
        try self.init(JSON.string(context))
    }

    /// The push service's origin (`https://host`, `:port` unless 443, an IPv6 host in brackets,
    /// lower case): the destination its sends are paused, slowed down and bounded by (a push
    /// service's answers act on the sends to it, never on the application's others). `nil` when
    /// the endpoint is not an absolute `https` URL (the service refuses to send there anyway).
    public var origin: String? { Self.origin(ofEndpoint: endpoint) }

    /// The origin of a stored `context` (``origin``); `nil` when it is not a Web Push context.
    public static func origin(context: String) -> String? {
        (try? WebPushContext(context: context))?.origin
    }

    /// `https://host[:port]` of an endpoint URL, as VAPID's `aud` names it (RFC 8292 §2).
    public static func origin(ofEndpoint endpoint: String) -> String? {
        let bytes = Array(endpoint.utf8)
        let scheme = Array("https://".utf8)
        // As the HTTP client reads a URL (PushHTTP's RequestTarget; a test holds them equal).
        guard bytes.count <= 8_192, bytes.starts(with: scheme), !bytes.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { return nil }
        let rest = bytes[scheme.count...]
        let end = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        let authority = rest[rest.startIndex..<end]
        guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")), !rest[end...].contains(UInt8(ascii: "#")) else { return nil }
        var host: ArraySlice<UInt8>
        var port: ArraySlice<UInt8>?
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            host = authority[(authority.startIndex + 1)..<close]
            let after = authority[(close + 1)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { return nil }
                port = after.dropFirst()
            }
            let hex = { (byte: UInt8) in (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte) }
            // An IPv6 literal has a colon ("[2001]" is no address), as RequestTarget requires.
            guard host.contains(UInt8(ascii: ":")), host.allSatisfy({ hex($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else { return nil }
        } else if let colon = authority.firstIndex(of: UInt8(ascii: ":")) {
            host = authority[authority.startIndex..<colon]
            port = authority[(colon + 1)...]
        } else {
            host = authority
        }
        guard !host.isEmpty, !host.contains(UInt8(ascii: "[")), !host.contains(UInt8(ascii: "]")) else { return nil }
        var number = 443
        if let port {
            guard (1...5).contains(port.count), port.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int(String(decoding: port, as: UTF8.self)),
                (1...65_535).contains(value)
            else { return nil }
            number = value
        }
        let name = String(decoding: host, as: UTF8.self).lowercased()
        let shown = name.contains(":") ? "[\(name)]" : name
        return number == 443 ? "https://\(shown)" : "https://\(shown):\(number)"
    }

    /// The canonical JSON text a subscription keeps as its `context`.
    public var canonicalText: String {
        var writer = JSONWriter(capacity: endpoint.utf8.count + p256dh.utf8.count + auth.utf8.count + 48)
        writer.write(.object(JSONObject([("endpoint", .string(endpoint)), ("keys", .object(JSONObject([("auth", .string(auth)), ("p256dh", .string(p256dh))])))])))
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}
