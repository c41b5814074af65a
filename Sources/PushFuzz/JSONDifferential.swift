import Foundation
import PushJSON

/// PushJSON's parser against Foundation's `JSONSerialization` (swift-corelibs-foundation on
/// Linux), on what the two must agree on.
///
/// Known, intended differences (not asserted):
/// - Foundation accepts a trailing comma (`[1,]`, `{"a":1,}`), a byte-order mark, UTF-16 and
///   UTF-32 input (told by NUL bytes), and a NUL after the value: we refuse them all (RFC 8259
///   and SPEC §7.1 are UTF-8 without a BOM). So "Foundation accepts ⇒ we accept" is asserted
///   only for inputs without these.
/// - Foundation refuses nesting deeper than 512; we accept up to `JSONParser.maxDepth` (1024).
///   So "we accept ⇒ Foundation accepts" is asserted only up to depth 512.
/// - Integers beyond 64 bits: Foundation gives an `NSDecimalNumber`, whose `doubleValue` is not
///   always the correctly rounded double; we give the correctly rounded double. Compared within
///   a relative 1e-12 only. (Foundation reads -9223372036854775808 as a decimal too: compared by
///   its text.)
/// - Keys that are different bytes but canonically equivalent Unicode (`"é"`, `"e\u{301}"`):
///   Foundation's `[String: Any]` merges them, we keep both (SPEC: keys compare by bytes). Such
///   objects are not compared member by member.
/// - Booleans come out of Foundation as `NSNumber`s: compared as 0 and 1.
enum JSONDifferential {
    static let foundationMaxDepth = 512

    static func compare(_ data: UnsafeBufferPointer<UInt8>, ours: Result<JSON, JSONParseError>) throws(FuzzViolation) {
        let theirs = try? JSONSerialization.jsonObject(with: Data(buffer: data), options: [.fragmentsAllowed])
        switch (ours, theirs) {
        case (.success(let value), nil):
            if depth(value) <= foundationMaxDepth {
                throw FuzzViolation("JSONParser accepts what Foundation refuses: \(Check.excerpt(data))")
            }
        case (.failure(let error), .some):
            if !foundationLeniency(data) {
                throw FuzzViolation("Foundation accepts what JSONParser refuses (\(error)): \(Check.excerpt(data))")
            }
        case (.success(let value), .some(let object)):
            if let difference = difference(value, object, at: "$") {
                throw FuzzViolation("JSONParser and Foundation read different values (\(difference)): \(Check.excerpt(data))")
            }
        case (.failure, nil):
            break
        }
    }

    /// Whether the input uses one of Foundation's leniencies: a BOM, a NUL byte (UTF-16/32
    /// detection, a NUL after the value), a comma before `]` or `}` outside strings.
    static func foundationLeniency(_ data: UnsafeBufferPointer<UInt8>) -> Bool {
        if data.starts(with: [0xEF, 0xBB, 0xBF]) || data.starts(with: [0xFE, 0xFF]) || data.starts(with: [0xFF, 0xFE]) { return true }
        if data.contains(0) { return true }
        var inString = false
        var escaped = false
        var afterComma = false
        for byte in data {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
                afterComma = false
            case UInt8(ascii: ","):
                afterComma = true
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                if afterComma { return true }
            case 0x20, 0x09, 0x0A, 0x0D:
                break
            default:
                afterComma = false
            }
        }
        return false
    }

    static func depth(_ value: JSON) -> Int {
        switch value {
        case .array(let elements): return 1 + (elements.map(depth).max() ?? 0)
        case .object(let object):
            var deepest = 0
            object.forEach { deepest = max(deepest, depth($0.value)) }
            return 1 + deepest
        default: return 0
        }
    }

    /// Where and how the two values differ; `nil` when they agree.
    static func difference(_ ours: JSON, _ theirs: Any, at location: String) -> String? {
        switch ours {
        case .null:
            return theirs is NSNull ? nil : "\(location): null against \(type(of: theirs))"
        case .bool(let flag):
            guard let number = theirs as? NSNumber, !(theirs is NSDecimalNumber) else { return "\(location): a boolean against \(type(of: theirs))" }
            return number.int64Value == (flag ? 1 : 0) ? nil : "\(location): \(flag) against \(number)"
        case .int(let integer):
            if let decimal = theirs as? NSDecimalNumber {
                // Foundation reads -9223372036854775808 as a decimal.
                return decimal.stringValue == "\(integer)" ? nil : "\(location): \(integer) against the decimal \(decimal)"
            }
            guard let number = theirs as? NSNumber else { return "\(location): \(integer) against \(type(of: theirs))" }
            switch String(cString: number.objCType) {
            case "d", "f":
                return Double(integer) == number.doubleValue ? nil : "\(location): \(integer) against the double \(number.doubleValue)"
            case "Q":
                return integer >= 0 && UInt64(integer) == number.uint64Value ? nil : "\(location): \(integer) against \(number.uint64Value)"
            default:
                return integer == number.int64Value ? nil : "\(location): \(integer) against \(number.int64Value)"
            }
        case .double(let double):
            if let decimal = theirs as? NSDecimalNumber {
                let other = decimal.doubleValue
                let close = double == other || abs(double - other) <= 1e-12 * max(abs(double), abs(other))
                return close ? nil : "\(location): \(double) against the decimal \(decimal) (\(other))"
            }
            guard let number = theirs as? NSNumber else { return "\(location): \(double) against \(type(of: theirs))" }
            let other: Double
            switch String(cString: number.objCType) {
            case "d", "f": other = number.doubleValue
            case "Q": other = Double(number.uint64Value)
            default: other = Double(number.int64Value)
            }
            return double == other ? nil : "\(location): \(double) (bits \(String(double.bitPattern, radix: 16))) against \(other) (bits \(String(other.bitPattern, radix: 16)))"
        case .string(let text):
            guard let other = theirs as? String else { return "\(location): a string against \(type(of: theirs))" }
            return Array(text.unicodeScalars) == Array(other.unicodeScalars) ? nil : "\(location): \(text.debugDescription) against \(other.debugDescription)"
        case .array(let elements):
            guard let others = theirs as? [Any] else { return "\(location): an array against \(type(of: theirs))" }
            guard elements.count == others.count else { return "\(location): \(elements.count) elements against \(others.count)" }
            for (index, element) in elements.enumerated() {
                if let difference = difference(element, others[index], at: "\(location)[\(index)]") { return difference }
            }
            return nil
        case .object(let object):
            guard let others = theirs as? [String: Any] else { return "\(location): an object against \(type(of: theirs))" }
            // Canonically equivalent keys: one member in Foundation's dictionary, two here.
            if Set(object.keys.map(\.string)).count != object.count { return nil }
            guard object.count == others.count else { return "\(location): \(object.count) members against \(others.count)" }
            for (key, value) in object {
                guard let other = others[key.string] else { return "\(location): member \(key.string.debugDescription) missing from Foundation's" }
                if let difference = difference(value, other, at: "\(location).\(key.string)") { return difference }
            }
            return nil
        }
    }
}
