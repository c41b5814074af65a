/// A JSON value.
///
/// Numbers keep the distinction of SPEC §3: a number written without fraction or exponent that
/// fits a signed 64-bit integer is `.int`; every other number is `.double`. Objects are
/// ``JSONObject``s, persistent maps whose members are always in the key order of SPEC §2, so
/// serialising one never sorts. Arrays keep their order. Values are immutable and share
/// structure: copying one is O(1).
public enum JSON: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object(JSONObject)
}

extension JSON {
    @inlinable public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    @inlinable public var objectValue: JSONObject? {
        if case .object(let object) = self { return object }
        return nil
    }

    @inlinable public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    @inlinable public var arrayValue: [JSON]? {
        if case .array(let array) = self { return array }
        return nil
    }

    @inlinable public var boolValue: Bool? {
        if case .bool(let bool) = self { return bool }
        return nil
    }

    /// The value as an integer when it is `.int`, or a `.double` with an exact integral value.
    public var integerValue: Int64? {
        switch self {
        case .int(let value):
            return value
        case .double(let value):
            guard value.rounded(.towardZero) == value, abs(value) < 9.223372036854775807e18 else { return nil }
            return Int64(value)
        default:
            return nil
        }
    }

    /// Member of an object by name; `nil` when this is not an object or has no such member.
    @inlinable public subscript(key: String) -> JSON? {
        if case .object(let object) = self { return object[PushJSON.Key(key)] }
        return nil
    }

    /// A short name of the value's type, for error messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

extension JSON: Equatable {
    /// Equality of SPEC §11.1: two values are equal when their compact serialisations are
    /// identical. So `1` equals `1.0` and `-0.0` equals `0`, `true` does not equal `1`, and
    /// strings compare by their UTF-8 bytes, not by Unicode canonical equivalence.
    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null):
            return true
        case let (.bool(a), .bool(b)):
            return a == b
        case let (.int(a), .int(b)):
            return a == b
        case let (.double(a), .double(b)):
            // Shortest round-trip digits are unique per double, and -0.0 and 0.0 both write "0".
            return a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)):
            // A double writes as an integer only when integral and below 2^53 in magnitude.
            return JSONWriter.isWrittenAsInteger(b) && Int64(b) == a
        case let (.string(a), .string(b)):
            return utf8Equal(a, b)
        case let (.array(a), .array(b)):
            return a == b
        case let (.object(a), .object(b)):
            return a == b
        default:
            return false
        }
    }
}

/// No `ExpressibleByNilLiteral`: with it, `nil` where a `JSON?` is expected would silently mean
/// `.null` rather than "absent". Write `.null`.
extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    /// Later duplicates win, as in parsed documents.
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self = .object(JSONObject(elements.map { (PushJSON.Key($0.0), $0.1) }))
    }
}

extension JSON: CustomStringConvertible {
    /// The compact serialisation of SPEC §7.1.
    public var description: String {
        var writer = JSONWriter()
        writer.write(self)
        return writer.string
    }
}
