import NIOHPACK

/// What the header fields of an HTTP/2 message may hold (RFC 9113 §8.2, §8.3), checked here for
/// both directions: swift-nio-http2's own header-block validation is off on our connections
/// (`HTTP2Connection.connect`), because it read every field as Swift strings: 1.3 % of the
/// samples of `deliver --tls` (issue 35, tenth session; docs/decisions.md, "HTTP/2 header fields
/// checked by the client itself"). These are the same rules, read over the bytes.
///
/// - An answer is malformed when a field name is not a lowercase token, a value holds NUL, CR or
///   LF, a connection-specific field is present, or its pseudo-header fields are anything but
///   one `:status` before the others (no pseudo-header at all in trailers).
/// - A request's fields given by a sender obey the same rules, and `te` may only say
///   `trailers`; the connection-specific ones (and `host`, `content-length`) are left out by
///   the transport before these checks, as they always were. The pseudo-header fields are the
///   transport's own, from a ``RequestTarget`` that holds no control character or space.
///
/// A fault is described by what is wrong and the field's name when it is a valid one, never by
/// a value (it may be a credential).
enum HTTP2Fields {
    /// Fields that are not HTTP/2's (RFC 9113 §8.2.2).
    static let connectionSpecific: Set<String> = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]

    /// A lowercase `token` (RFC 9110 §5.6.2, RFC 9113 §8.2.1): a regular field's name, and a
    /// pseudo-header's after its colon.
    static func isName(_ name: Substring.UTF8View) -> Bool {
        guard !name.isEmpty else { return false }
        for byte in name {
            switch byte {
            case 0x21, 0x23...0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x30...0x39, 0x5E...0x7A, 0x7C, 0x7E: continue
            default: return false
            }
        }
        return true
    }

    static func isName(_ name: String) -> Bool { isName(Substring(name).utf8) }

    /// A regular field's value: no NUL, LF or CR anywhere (RFC 9113 §8.2.1).
    static func isValue(_ value: String) -> Bool {
        for byte in value.utf8 where byte == 0x00 || byte == 0x0A || byte == 0x0D { return false }
        return true
    }

    /// A pseudo-header field's value: nothing at or below space, no DEL.
    static func isPseudoValue(_ value: String) -> Bool {
        for byte in value.utf8 where byte <= 0x20 || byte == 0x7F { return false }
        return true
    }

    /// Whether `name` (a lowercase token) is connection-specific: compared only when its length
    /// is one of theirs.
    static func isConnectionSpecific(_ name: String) -> Bool {
        switch name.utf8.count {
        case 7, 10, 16, 17: connectionSpecific.contains(name)
        default: false
        }
    }

    /// What is wrong with an answer's header block, `nil` when nothing: the response's (or an
    /// informational one's) carries `:status` once, before the regular fields, and no other
    /// pseudo-header; trailers carry none.
    static func fault(inAnswer headers: HPACKHeaders, trailers: Bool) -> String? {
        var statuses = 0
        var regular = false
        for (name, value, _) in headers {
            if name.utf8.first == UInt8(ascii: ":") {
                guard !trailers else { return "a pseudo-header field in trailers" }
                guard !regular else { return "a pseudo-header field after a regular one" }
                guard name == ":status" else {
                    return isName(Substring(name).utf8.dropFirst()) ? "the pseudo-header field \(name), which an answer cannot carry" : "an invalid field name"
                }
                guard isPseudoValue(value) else { return "a :status that is no valid value" }
                statuses += 1
                guard statuses == 1 else { return "two :status fields" }
                continue
            }
            regular = true
            if let fault = fault(name: name, value: value) { return fault }
        }
        if !trailers, statuses == 0 { return "no :status" }
        return nil
    }

    /// What is wrong with one of a request's regular fields (lowercased), `nil` when nothing: an
    /// answer's rules, and `te` only as `trailers` (RFC 9113 §8.2.2).
    static func fault(requestField name: String, value: String) -> String? {
        if name == "te", value != "trailers" { return "te other than trailers" }
        return fault(name: name, value: value)
    }

    /// What is wrong with a regular field of an answer or a request, `nil` when nothing.
    static func fault(name: String, value: String) -> String? {
        guard isName(name) else { return "an invalid field name" }
        guard !isConnectionSpecific(name) else { return "the connection-specific field \(name)" }
        guard isValue(value) else { return "the field \(name) holds NUL, CR or LF" }
        return nil
    }
}
