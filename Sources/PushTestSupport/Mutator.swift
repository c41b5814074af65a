import PushCore
import PushJSON

/// A seeded random number generator (SplitMix64): the same seed gives the same sequence, so a
/// failing bad-input case is reproduced from its seed.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound`.
    public mutating func below(_ bound: Int) -> Int {
        Int(next() % UInt64(max(1, bound)))
    }

    public mutating func pick<T>(_ choices: [T]) -> T {
        choices[below(choices.count)]
    }

    public mutating func chance(_ percent: Int) -> Bool {
        below(100) < percent
    }
}

/// Makes bad inputs from good ones: byte-level damage (flips, interesting bytes, cuts,
/// repeats) and, for JSON, structural damage (fields dropped, values replaced by values at
/// their limits, wrong types, deep nesting, huge strings).
public struct Mutator {
    public var random: SeededRandom

    public init(seed: UInt64) {
        random = SeededRandom(seed: seed)
    }

    /// Bytes that break parsers: delimiters, escapes, UTF-8 lead and continuation bytes,
    /// control characters.
    static let interestingBytes: [UInt8] = [
        0x00, 0x01, 0x0A, 0x0D, 0x1F, 0x20, 0x22, 0x27, 0x2C, 0x2D, 0x2E, 0x2F, 0x30, 0x39, 0x3A, 0x5B, 0x5C, 0x5D, 0x65, 0x7B,
        0x7D, 0x7F, 0x80, 0xBF, 0xC0, 0xC3, 0xE2, 0xED, 0xF0, 0xF4, 0xF8, 0xFF,
    ]

    /// Fragments spliced in: numbers at their limits, escapes, literals, deep nesting.
    static let interestingFragments: [String] = [
        "1e400", "-1e400", "1e-400", "-0", "0.0", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
        "18446744073709551616", "4294967296", "2147483648", "1.7976931348623157e308", "5e-324", "NaN", "Infinity",
        "\"\\ud800\"", "\"\\udfff\"", "\"\\u0000\"", "\"\\uZZZZ\"", "null", "true", "false", "[]", "{}", "\"\"",
        String(repeating: "[", count: 2000), String(repeating: "{\"a\":", count: 600), "\"\u{202E}\"", "\"a.b$c#d[e]f/g\"",
    ]

    /// `input` with one to four byte-level mutations.
    public mutating func mutateBytes(_ input: [UInt8]) -> [UInt8] {
        var bytes = input
        for _ in 0..<(1 + random.below(4)) {
            let position = bytes.isEmpty ? 0 : random.below(bytes.count + 1)
            switch random.below(8) {
            case 0 where !bytes.isEmpty:
                let index = min(position, bytes.count - 1)
                bytes[index] ^= UInt8(1 << random.below(8))
            case 1 where !bytes.isEmpty:
                bytes[min(position, bytes.count - 1)] = random.pick(Self.interestingBytes)
            case 2:
                bytes.insert(random.pick(Self.interestingBytes), at: position)
            case 3 where !bytes.isEmpty:
                let end = min(bytes.count, position + 1 + random.below(16))
                bytes.removeSubrange(min(position, end)..<end)
            case 4:
                bytes.insert(contentsOf: Array(random.pick(Self.interestingFragments).utf8), at: position)
            case 5 where !bytes.isEmpty:
                bytes = Array(bytes.prefix(random.below(bytes.count)))
            case 6 where !bytes.isEmpty:
                let start = min(position, bytes.count - 1)
                let end = min(bytes.count, start + 1 + random.below(32))
                bytes.insert(contentsOf: bytes[start..<end], at: start)
            default:
                bytes.insert(contentsOf: Array(repeating: UInt8(ascii: "a"), count: 1 + random.below(5000)), at: position)
            }
        }
        return bytes
    }

    /// Values at their limits and of every type, to put where a field was.
    public mutating func strangeValue() -> JSON {
        let choices: [JSON] = [
            .null, .bool(true), .bool(false), .int(0), .int(-1), .int(.max), .int(.min), .double(1e308), .double(-0.0),
            .double(.leastNonzeroMagnitude), .double(0.5), .string(""), .string(" "), .string("\u{0}"), .string("a/b"), .string("../.."),
            .string("é\u{301}"), .string(String(repeating: "x", count: 5000)), .array([]), .array([.null, .int(1)]),
            .object(JSONObject()), .object(JSONObject([(Key("a"), .int(1))])),
        ]
        return random.pick(choices)
    }

    /// `value` with one structural mutation somewhere inside.
    public mutating func mutateJSON(_ value: JSON, depth: Int = 0) -> JSON {
        switch value {
        case .object(let object) where !object.isEmpty && (depth == 0 || random.chance(70)):
            let keys = object.keys
            let key = random.pick(keys)
            switch random.below(5) {
            case 0: return .object(object.removing(key))
            case 1: return .object(object.setting(key, to: strangeValue()))
            case 2: return .object(object.setting(key, to: mutateJSON(object[key]!, depth: depth + 1)))
            case 3: return .object(object.setting(Key(key.string + random.pick(["x", "_", "", " "])), to: strangeValue()))
            default: return .object(object.setting(key, to: .array([object[key]!])))
            }
        case .array(var elements) where !elements.isEmpty && random.chance(70):
            let index = random.below(elements.count)
            elements[index] = random.chance(50) ? strangeValue() : mutateJSON(elements[index], depth: depth + 1)
            return .array(elements)
        default:
            return strangeValue()
        }
    }
}
