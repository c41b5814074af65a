/// Where a request goes, read once from its URL: the scheme, the host and port to connect to,
/// and what HTTP/2's pseudo-headers carry (`:authority`, `:path`).
public struct RequestTarget: Hashable, Sendable {
    /// `https` (else `http`).
    public var secure: Bool
    /// The host as connected to: a name, or an IP address (IPv6 without its brackets).
    public var host: String
    public var port: Int
    /// `host[:port]` as the URL wrote it (brackets kept), for `:authority`.
    public var authority: String
    /// The path and query, at least `/`.
    public var path: String

    /// A host and port: what connections are pooled by.
    public struct Origin: Hashable, Sendable {
        public var host: String
        public var port: Int
    }

    public var origin: Origin { Origin(host: host, port: port) }

    /// Reads an absolute `http` or `https` URL; `nil` for anything else (no user information,
    /// no fragment, a port from 1 to 65535, no control characters or spaces).
    public init?(_ url: String) {
        let bytes = Array(url.utf8)
        guard bytes.count <= 8192, !bytes.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { return nil }
        let rest: ArraySlice<UInt8>
        if bytes.starts(with: Array("https://".utf8)) {
            secure = true
            rest = bytes[8...]
        } else if bytes.starts(with: Array("http://".utf8)) {
            secure = false
            rest = bytes[7...]
        } else {
            return nil
        }
        let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        let authorityBytes = rest[rest.startIndex..<authorityEnd]
        guard !authorityBytes.isEmpty, !authorityBytes.contains(UInt8(ascii: "@")) else { return nil }
        var pathBytes = rest[authorityEnd...]
        guard !pathBytes.contains(UInt8(ascii: "#")) else { return nil }
        if pathBytes.first == UInt8(ascii: "?") { pathBytes = ArraySlice(Array("/".utf8) + pathBytes) }
        path = pathBytes.isEmpty ? "/" : String(decoding: pathBytes, as: UTF8.self)
        authority = String(decoding: authorityBytes, as: UTF8.self)

        // host, [v6], host:port, [v6]:port
        var hostPart: ArraySlice<UInt8>
        var portPart: ArraySlice<UInt8>?
        if authorityBytes.first == UInt8(ascii: "[") {
            guard let close = authorityBytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            hostPart = authorityBytes[(authorityBytes.startIndex + 1)..<close]
            let after = authorityBytes[(close + 1)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { return nil }
                portPart = after.dropFirst()
            }
            // An IPv6 literal: hex digits, dots and at least one colon ("[2001]" is no address,
            // and a host without a colon is written without brackets everywhere else).
            guard hostPart.contains(UInt8(ascii: ":")), hostPart.allSatisfy({ Self.isHex($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else { return nil }
        } else if let colon = authorityBytes.firstIndex(of: UInt8(ascii: ":")) {
            hostPart = authorityBytes[authorityBytes.startIndex..<colon]
            portPart = authorityBytes[(colon + 1)...]
        } else {
            hostPart = authorityBytes
        }
        guard !hostPart.isEmpty, !hostPart.contains(UInt8(ascii: "[")), !hostPart.contains(UInt8(ascii: "]")) else { return nil }
        host = String(decoding: hostPart, as: UTF8.self)
        if let portPart {
            guard (1...5).contains(portPart.count), portPart.allSatisfy({ (0x30...0x39).contains($0) }),
                let number = Int(String(decoding: portPart, as: UTF8.self)), (1...65_535).contains(number)
            else { return nil }
            port = number
        } else {
            port = secure ? 443 : 80
        }
    }

    static func isHex(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }

    /// Whether the host is an IP address literal (no server name to send in TLS's SNI).
    public var hostIsAddress: Bool {
        host.contains(":") || (host.split(separator: ".", omittingEmptySubsequences: false).count == 4 && host.allSatisfy { $0.isNumber || $0 == "." })
    }
}
