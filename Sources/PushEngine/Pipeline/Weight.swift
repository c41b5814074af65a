import PushCore
import PushJSON

extension JSON {
    /// The byte length of the compact serialisation (SPEC §7.1), or `nil` as soon as it exceeds
    /// `limit`: the weight of SPEC §11.4, counted without writing, and stopping early so that a
    /// huge value costs no more than `limit` bytes of counting.
    public func compactLength(limit: Int) -> Int? {
        var total = 0
        return JSON.count(self, &total, limit) ? total : nil
    }

    /// An upper bound of the compact length (SPEC §7.1) of any value parsed from a JSON text of
    /// `sourceBytes` bytes: a string or a key is never written longer than its source (escapes
    /// only where the source had to escape too; `\u` escapes of other characters become
    /// shorter UTF-8), structure and literals never longer, whitespace dropped; a number is
    /// written in at most 24 characters, from a source of at least 1 (an integer, written as
    /// its digits) or at least 3 (a fraction or an exponent: `1e9`, `0.5`). Hence 8 bytes per
    /// source byte. The weight check can skip counting a value whose source is short enough.
    public static func compactLengthBound(sourceBytes: Int) -> Int {
        sourceBytes.multipliedReportingOverflow(by: 8).overflow ? .max : sourceBytes * 8
    }

    /// Adds the length of `value` to `total`; `false` once `total` exceeds `limit`.
    private static func count(_ value: JSON, _ total: inout Int, _ limit: Int) -> Bool {
        switch value {
        case .null: total += 4
        case .bool(let flag): total += flag ? 4 : 5
        case .int(let number): total += digits(number)
        case .double(let number):
            if JSONWriter.isWrittenAsInteger(number) {
                total += digits(Int64(number))
            } else {
                var writer = JSONWriter(capacity: 32)
                writer.write(value)
                total += writer.count
            }
        case .string(let text): total += stringLength(text)
        case .array(let elements):
            total += 1 + max(0, elements.count - 1) + 1
            for element in elements {
                if total > limit || !count(element, &total, limit) { return false }
            }
        case .object(let object):
            total += 1 + max(0, object.count - 1) + 1
            var fits = true
            object.forEachLeaf { members in
                guard fits else { return }
                for member in members {
                    total += stringLength(member.key.string) + 1
                    if total > limit || !count(member.value, &total, limit) {
                        fits = false
                        return
                    }
                }
            }
            if !fits { return false }
        }
        return total <= limit
    }

    private static func digits(_ number: Int64) -> Int {
        if number == .min { return 20 }
        var value = number < 0 ? -number : number
        var count = number < 0 ? 2 : 1
        while value >= 10 {
            value /= 10
            count += 1
        }
        return count
    }

    /// Length of a string written as SPEC §7.1 says, quotes included.
    private static func stringLength(_ text: String) -> Int {
        withUTF8Bytes(text) { bytes in
            var length = 2 + bytes.count
            for byte in bytes where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x08, 0x0C, 0x0A, 0x0D, 0x09: length += 1
                default: length += 5
                }
            }
            return length
        }
    }
}
