import Foundation

/// Classifies IP addresses: the ones a request built from outside input may reach.
public enum AddressClass {
    /// The 4 or 16 bytes of an IP address literal (`192.0.2.1`, `2001:db8::1`), or `nil` for a
    /// name.
    public static func literal(_ host: String) -> [UInt8]? {
        if let v4 = ipv4(host) { return v4 }
        return ipv6(host)
    }

    /// Whether `address` (4 or 16 bytes) is a public unicast address: not unspecified,
    /// loopback, private (RFC 1918, unique local), shared (100.64/10), link-local, multicast,
    /// benchmarking, documentation or reserved, not the 6to4 relay range. An IPv4-mapped, NAT64
    /// (64:ff9b::/96) or 6to4 IPv6 address is judged by the IPv4 address it carries;
    /// IPv4-compatible ones, local-use NAT64 (64:ff9b:1::/48) and Teredo (2001::/32) are refused.
    public static func isPublic(_ address: [UInt8]) -> Bool {
        switch address.count {
        case 4:
            let (a, b, c) = (address[0], address[1], address[2])
            switch a {
            case 0, 10, 127: return false
            case 100 where b & 0xC0 == 64: return false  // 100.64.0.0/10, shared address space
            case 169 where b == 254: return false  // link-local (cloud metadata services)
            case 172 where b & 0xF0 == 16: return false
            case 192 where b == 168: return false
            case 192 where b == 0 && (c == 0 || c == 2): return false  // IETF protocol assignments, TEST-NET-1
            case 192 where b == 88 && c == 99: return false  // 6to4 relay anycast (RFC 7526)
            case 198 where b & 0xFE == 18: return false  // benchmarking
            case 198 where b == 51 && c == 100: return false  // TEST-NET-2
            case 203 where b == 0 && c == 113: return false  // TEST-NET-3
            case 224...255: return false  // multicast, reserved, broadcast
            default: return true
            }
        case 16:
            let prefix96 = address[0..<12]
            if prefix96.allSatisfy({ $0 == 0 }) { return false }  // ::, ::1 and IPv4-compatible ::a.b.c.d
            if prefix96.elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) { return isPublic(Array(address[12..<16])) }
            if prefix96.elementsEqual([0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0]) { return isPublic(Array(address[12..<16])) }
            // 64:ff9b:1::/48, local-use NAT64 (RFC 8215): translated inside a network, never a
            // public destination (and where it puts the IPv4 address depends on the prefix).
            if address[0..<6].elementsEqual([0x00, 0x64, 0xFF, 0x9B, 0x00, 0x01]) { return false }
            // 2002::/16, 6to4: the IPv4 address of its relay is bytes 2 to 5.
            if address[0] == 0x20 && address[1] == 0x02 { return isPublic(Array(address[2..<6])) }
            // 2001::/32, Teredo: a tunnel through a server to a client behind NAT, not a destination.
            if address[0..<4].elementsEqual([0x20, 0x01, 0x00, 0x00]) { return false }
            if address[0] & 0xFE == 0xFC { return false }  // fc00::/7 unique local
            if address[0] == 0xFE && address[1] & 0xC0 == 0x80 { return false }  // fe80::/10 link-local
            if address[0] == 0xFE && address[1] & 0xC0 == 0xC0 { return false }  // fec0::/10 site-local (deprecated)
            if address[0] == 0xFF { return false }  // multicast
            if address[0] == 0x20 && address[1] == 0x01 && address[2] == 0x0D && address[3] == 0xB8 { return false }  // documentation
            if address[0] == 0x01 && address[1] == 0 && address[2..<8].allSatisfy({ $0 == 0 }) { return false }  // 100::/64 discard
            return true
        default:
            return false
        }
    }

    public static func ipv4(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            // Canonical decimal only: `0177` is octal to inet_aton (127), so a leading zero is
            // not read as this function would read it.
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }), part == "0" || part.first != "0",
                let value = UInt8(part)
            else { return nil }
            bytes.append(value)
        }
        return bytes
    }

    public static func ipv6(_ text: String) -> [UInt8]? {
        guard text.contains(":"), text.utf8.count <= 45 else { return nil }
        var head: [UInt16] = []
        var tail: [UInt16] = []
        var sawGap = false
        var trailingV4: [UInt8]?
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        for (index, half) in halves.enumerated() {
            if index == 1 { sawGap = true }
            guard !half.isEmpty else { continue }
            let groups = half.split(separator: ":", omittingEmptySubsequences: false)
            for (position, group) in groups.enumerated() {
                if position == groups.count - 1, index == halves.count - 1, group.contains(".") {
                    guard let v4 = ipv4(String(group)) else { return nil }
                    trailingV4 = v4
                    continue
                }
                guard (1...4).contains(group.count), let value = UInt16(group, radix: 16) else { return nil }
                if index == 0 { head.append(value) } else { tail.append(value) }
            }
        }
        let v4Groups = trailingV4 == nil ? 0 : 2
        let count = head.count + tail.count + v4Groups
        if sawGap { guard count < 8 else { return nil } } else { guard count == 8 else { return nil } }
        var groups = head + Array(repeating: 0, count: 8 - count) + tail
        if let v4 = trailingV4 {
            groups += [UInt16(v4[0]) << 8 | UInt16(v4[1]), UInt16(v4[2]) << 8 | UInt16(v4[3])]
        }
        guard groups.count == 8 else { return nil }
        return groups.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }
}
