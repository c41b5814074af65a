import Foundation
import PushCore
import PushJSON

enum ConfigurationValues {
    /// `500ms`, `10s`, `5m`, `2h`, `7d`.
    static func duration(_ text: String) -> Duration? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (suffix, milliseconds) in units where text.hasSuffix(suffix) {
            let digits = text.dropLast(suffix.count)
            // "ms" ends in "s": only accept "s" when what precedes it is all digits.
            guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy(\.isASCIIDigit), let value = Int64(digits),
                value <= Int64.max / milliseconds
            else { continue }
            return .milliseconds(value * milliseconds)
        }
        return nil
    }

    /// A duration as the configuration would write it.
    static func describe(_ duration: Duration) -> String {
        let milliseconds = duration.wholeMilliseconds
        for (suffix, unit) in [("d", Int64(86_400_000)), ("h", 3_600_000), ("m", 60_000), ("s", 1000)]
        where milliseconds >= unit && milliseconds % unit == 0 {
            return "\(milliseconds / unit)\(suffix)"
        }
        return "\(milliseconds)ms"
    }

    /// `4096`, `64KiB`, `1MiB`, `1GiB`.
    static func size(_ text: String) -> Int64? {
        let units: [(String, Int64)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("", 1)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            let digits = text.dropLast(suffix.count)
            guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy(\.isASCIIDigit), let value = Int64(digits),
                value <= Int64.max / factor
            else { continue }
            return value * factor
        }
        return nil
    }

    /// `200/s`, `600000/min` (or `/m`), `50000/h`: sends per second; `off`: 0.
    static func rate(_ text: String) -> Double? {
        if text == "off" { return 0 }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[0].count <= 12, parts[0].allSatisfy(\.isASCIIDigit), let count = Double(parts[0]) else { return nil }
        switch parts[1] {
        case "s": return count
        case "m", "min": return count / 60
        case "h": return count / 3_600
        default: return nil
        }
    }

    /// A rate as the configuration would write it.
    static func describe(rate perSecond: Double) -> String {
        if perSecond == 0 { return "off" }
        if perSecond == perSecond.rounded() { return "\(Int64(perSecond))/s" }
        let perMinute = perSecond * 60
        return perMinute == perMinute.rounded() ? "\(Int64(perMinute))/min" : "\(Int64((perSecond * 3_600).rounded()))/h"
    }

    /// An IPv4 or IPv6 address, or a DNS host name (RFC 1123 labels).
    static func isHost(_ text: String) -> Bool {
        if text.isEmpty || text.utf8.count > 253 { return false }
        if text.contains(":") {
            var address = in6_addr()
            return inet_pton(AF_INET6, text, &address) == 1
        }
        if text.allSatisfy({ $0.isASCIIDigit || $0 == "." }) {
            var address = in_addr()
            return inet_pton(AF_INET, text, &address) == 1
        }
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        return labels.allSatisfy { label in
            !label.isEmpty && label.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        }
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}

func quotedString(_ text: String) -> String {
    JSONWriter.quoted(text)
}
