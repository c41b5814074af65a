/// A strict RFC 8259 parser over UTF-8 bytes.
///
/// - Rejects invalid UTF-8, unpaired surrogate escapes, leading zeros, `NaN`/`Infinity`,
///   trailing commas, comments and anything after the value but white space.
/// - Numbers: without fraction or exponent and within Int64 → `.int`; otherwise `.double`,
///   correctly rounded; a number beyond the double range (`1e400`) is an error.
/// - Objects come out in key order; of repeated keys the last one wins.
/// - Nesting is limited to ``maxDepth`` levels.
public struct JSONParser {
    /// Deepest nesting of arrays and objects accepted.
    public static let maxDepth = 1024

    /// Parses one JSON document.
    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> JSON {
        var parser = JSONParser(bytes)
        defer { parser.release() }
        return try parser.parseDocument()
    }

    /// Parses one JSON document in which no object repeats a key (a repeated key is an error
    /// instead of the last one winning): for inputs whose readers may disagree on which one
    /// counts, such as a notification payload.
    public static func parseRejectingDuplicateKeys(_ bytes: [UInt8]) throws(JSONParseError) -> JSON {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            var parser = JSONParser(buffer)
            parser.rejectDuplicateKeys = true
            defer { parser.release() }
            return try parser.parseDocument()
        }
    }

    /// Parses one JSON document.
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSON {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in try parse(buffer) }
    }

    /// Parses one JSON document.
    public static func parse(_ text: String) throws(JSONParseError) -> JSON {
        var copy = text
        let result = copy.withUTF8 { buffer in
            Result { () throws(JSONParseError) in try parse(buffer) }
        }
        return try result.get()
    }

    // MARK: - State

    @usableFromInline let input: UnsafeBufferPointer<UInt8>
    @usableFromInline var position = 0
    /// Members of the objects being parsed, innermost last.
    var memberStack = ScratchStack<JSONObject.Member>(capacity: 32)
    /// Elements of the arrays being parsed, innermost last.
    var elementStack = ScratchStack<JSON>(capacity: 16)
    /// Bytes of a string with escapes, being decoded.
    @usableFromInline var stringScratch = ContiguousArray<UInt8>()
    /// Where the contents of the last string parsed start in the input, and whether it had
    /// escapes (when it had none, its raw bytes are its UTF-8).
    var lastStringStart = 0
    var lastStringEscaped = false
    /// A repeated key in an object is an error (else the last one wins).
    var rejectDuplicateKeys = false

    init(_ input: UnsafeBufferPointer<UInt8>) {
        self.input = input
    }

    /// Frees the scratch stacks (and whatever an error left on them).
    func release() {
        memberStack.release()
        elementStack.release()
    }

    mutating func parseDocument() throws(JSONParseError) -> JSON {
        skipWhitespace()
        guard position < input.count else {
            throw fail("empty input; expected a JSON value")
        }
        let value = try parseValue(depth: 0)
        skipWhitespace()
        if position < input.count {
            throw fail("unexpected \(describeByte(at: position)) after the JSON value; expected the end of the input")
        }
        return value
    }

    // MARK: - Helpers

    @inline(__always)
    func fail(_ reason: String, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(offset: offset ?? position, reason: reason)
    }

    func describeByte(at offset: Int) -> String {
        guard offset < input.count else { return "end of input" }
        let byte = input[offset]
        if byte >= 0x21 && byte < 0x7F {
            return "'\(Character(Unicode.Scalar(byte)))'"
        }
        let hex = String(byte, radix: 16, uppercase: true)
        return "byte 0x\(hex.count == 1 ? "0" + hex : hex)"
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while position < input.count {
            switch input[position] {
            case 0x20, 0x0A, 0x0D, 0x09:
                position += 1
            default:
                return
            }
        }
    }

    // MARK: - Values

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSON {
        guard position < input.count else {
            throw fail("unexpected end of input; expected a JSON value")
        }
        switch input[position] {
        case UInt8(ascii: "{"):
            return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["):
            return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber()
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        default:
            throw fail(
                "unexpected \(describeByte(at: position)); expected a JSON value (object, array, string, number, true, false or null)"
            )
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let start = position
        let count = literal.utf8CodeUnitCount
        let bytes = literal.utf8Start
        var i = 0
        while i < count {
            guard position + i < input.count, input[position + i] == bytes[i] else {
                throw fail("invalid literal; expected \(literal)", at: start)
            }
            i += 1
        }
        position += count
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSON {
        let open = position
        if depth > JSONParser.maxDepth {
            throw fail("nesting deeper than \(JSONParser.maxDepth) levels")
        }
        position += 1  // {
        skipWhitespace()
        let base = memberStack.count
        if position < input.count && input[position] == UInt8(ascii: "}") {
            position += 1
            return .object(JSONObject())
        }
        var inOrder = true
        // The previous key, to check that members arrive in key order (then no sort is needed).
        var previousKey: Key?
        var previousRaw: UnsafeBufferPointer<UInt8>?
        while true {
            guard position < input.count else {
                throw fail("unexpected end of input in the object opened at byte \(open); expected a string key")
            }
            guard input[position] == UInt8(ascii: "\"") else {
                throw fail("unexpected \(describeByte(at: position)); expected a string key in double quotes")
            }
            let key = Key(try parseString())
            let raw = lastStringEscaped
                ? nil : UnsafeBufferPointer(rebasing: input[lastStringStart..<(position - 1)])
            skipWhitespace()
            guard position < input.count, input[position] == UInt8(ascii: ":") else {
                throw fail("unexpected \(describeByte(at: position)); expected ':' after the object key")
            }
            position += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            if inOrder, let previous = previousKey {
                let order: Int
                if let raw, let previousRaw {
                    order = Key.compareBytes(previousRaw, raw)
                } else {
                    order = Key.compare(previous, key)
                }
                if order >= 0 { inOrder = false }
            }
            previousKey = key
            previousRaw = raw
            memberStack.push(JSONObject.Member(key, value))
            skipWhitespace()
            guard position < input.count else {
                throw fail("unexpected end of input in the object opened at byte \(open); expected ',' or '}'")
            }
            let byte = input[position]
            position += 1
            if byte == UInt8(ascii: ",") {
                skipWhitespace()
                continue
            }
            if byte == UInt8(ascii: "}") { break }
            throw fail("unexpected \(describeByte(at: position - 1)); expected ',' or '}' after an object member", at: position - 1)
        }
        var entries = memberStack.popContiguous(from: base)
        if !inOrder {
            let count = entries.count
            JSONObject.sortRemovingDuplicates(&entries)
            if rejectDuplicateKeys && entries.count < count {
                throw fail("the object opened at byte \(open) repeats a key; expected each key once", at: open)
            }
        }
        return .object(JSONObject(root: BTreeNode.build(entries)))
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSON {
        let open = position
        if depth > JSONParser.maxDepth {
            throw fail("nesting deeper than \(JSONParser.maxDepth) levels")
        }
        position += 1  // [
        skipWhitespace()
        let base = elementStack.count
        if position < input.count && input[position] == UInt8(ascii: "]") {
            position += 1
            return .array([])
        }
        while true {
            let value = try parseValue(depth: depth)
            elementStack.push(value)
            skipWhitespace()
            guard position < input.count else {
                throw fail("unexpected end of input in the array opened at byte \(open); expected ',' or ']'")
            }
            let byte = input[position]
            position += 1
            if byte == UInt8(ascii: ",") {
                skipWhitespace()
                continue
            }
            if byte == UInt8(ascii: "]") { break }
            throw fail("unexpected \(describeByte(at: position - 1)); expected ',' or ']' after an array element", at: position - 1)
        }
        return .array(elementStack.popArray(from: base))
    }

    // MARK: - Strings

    /// Parses a string starting at its opening quote.
    mutating func parseString() throws(JSONParseError) -> String {
        let open = position
        position += 1
        let start = position
        lastStringStart = start
        lastStringEscaped = false
        // Fast path: no escapes. Scan for the closing quote, validating UTF-8 as we go.
        while position < input.count {
            // Skip plain ASCII eight bytes at a time.
            if position + 8 <= input.count {
                let word = UnsafeRawPointer(input.baseAddress! + position).loadUnaligned(as: UInt64.self)
                let special = specialStringBytes(word)
                if special == 0 {
                    position += 8
                    continue
                }
                position += special.trailingZeroBitCount >> 3
            }
            let byte = input[position]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: input[start..<position])
                position += 1
                return String(decoding: slice, as: UTF8.self)
            }
            if byte == UInt8(ascii: "\\") {
                return try parseEscapedString(open: open, start: start)
            }
            if byte < 0x20 {
                throw controlCharacterError(byte)
            }
            if byte < 0x80 {
                position += 1
            } else {
                try skipUTF8Sequence()
            }
        }
        throw fail("unterminated string opened at byte \(open); expected a closing '\"'")
    }

    func controlCharacterError(_ byte: UInt8) -> JSONParseError {
        let hex = String(byte, radix: 16)
        let code = String(repeating: "0", count: 4 - hex.count) + hex
        return fail("unescaped control character U+\(code.uppercased()) in a string; expected it escaped as \\u\(code)")
    }

    /// The slow path: the string holds escapes. Copies bytes into the scratch buffer.
    mutating func parseEscapedString(open: Int, start: Int) throws(JSONParseError) -> String {
        lastStringEscaped = true
        stringScratch.removeAll(keepingCapacity: true)
        stringScratch.append(contentsOf: UnsafeBufferPointer(rebasing: input[start..<position]))
        while position < input.count {
            let byte = input[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                return stringScratch.withUnsafeBufferPointer { String(decoding: $0, as: UTF8.self) }
            }
            if byte == UInt8(ascii: "\\") {
                try parseEscape()
                continue
            }
            if byte < 0x20 {
                throw controlCharacterError(byte)
            }
            if byte < 0x80 {
                stringScratch.append(byte)
                position += 1
            } else {
                let sequenceStart = position
                try skipUTF8Sequence()
                stringScratch.append(contentsOf: UnsafeBufferPointer(rebasing: input[sequenceStart..<position]))
            }
        }
        throw fail("unterminated string opened at byte \(open); expected a closing '\"'")
    }

    /// Decodes one escape sequence at `position` (a backslash) into the scratch buffer.
    mutating func parseEscape() throws(JSONParseError) {
        let escapeStart = position
        guard position + 1 < input.count else {
            throw fail("unterminated escape sequence; expected a character after '\\'")
        }
        let byte = input[position + 1]
        position += 2
        switch byte {
        case UInt8(ascii: "\""): stringScratch.append(0x22)
        case UInt8(ascii: "\\"): stringScratch.append(0x5C)
        case UInt8(ascii: "/"): stringScratch.append(0x2F)
        case UInt8(ascii: "b"): stringScratch.append(0x08)
        case UInt8(ascii: "f"): stringScratch.append(0x0C)
        case UInt8(ascii: "n"): stringScratch.append(0x0A)
        case UInt8(ascii: "r"): stringScratch.append(0x0D)
        case UInt8(ascii: "t"): stringScratch.append(0x09)
        case UInt8(ascii: "u"):
            let unit = try parseHex4(escapeStart: escapeStart)
            var scalar: UInt32
            if unit >= 0xD800 && unit <= 0xDBFF {
                // A high surrogate must be followed by an escaped low surrogate.
                guard position + 1 < input.count, input[position] == UInt8(ascii: "\\"),
                    input[position + 1] == UInt8(ascii: "u")
                else {
                    throw fail(
                        "unpaired surrogate \\u\(hex4(unit)); expected a low surrogate \\uDC00–\\uDFFF to follow",
                        at: escapeStart)
                }
                let lowStart = position
                position += 2
                let low = try parseHex4(escapeStart: lowStart)
                guard low >= 0xDC00 && low <= 0xDFFF else {
                    throw fail(
                        "unpaired surrogate \\u\(hex4(unit)); expected a low surrogate \\uDC00–\\uDFFF to follow",
                        at: escapeStart)
                }
                scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            } else if unit >= 0xDC00 && unit <= 0xDFFF {
                throw fail("unpaired low surrogate \\u\(hex4(unit)); expected a high surrogate \\uD800–\\uDBFF before it",
                    at: escapeStart)
            } else {
                scalar = UInt32(unit)
            }
            appendUTF8(scalar)
        default:
            throw fail(
                "invalid escape sequence '\\\(describeEscaped(byte))'; expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX",
                at: escapeStart)
        }
    }

    func describeEscaped(_ byte: UInt8) -> String {
        byte >= 0x21 && byte < 0x7F ? String(Character(Unicode.Scalar(byte))) : "<0x\(String(byte, radix: 16))>"
    }

    func hex4(_ unit: UInt16) -> String {
        let hex = String(unit, radix: 16, uppercase: true)
        return String(repeating: "0", count: 4 - hex.count) + hex
    }

    mutating func parseHex4(escapeStart: Int) throws(JSONParseError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard position < input.count else {
                throw fail("truncated \\u escape; expected 4 hexadecimal digits", at: escapeStart)
            }
            let byte = input[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default:
                throw fail("invalid \\u escape; expected 4 hexadecimal digits", at: escapeStart)
            }
            value = value << 4 | UInt16(digit)
            position += 1
        }
        return value
    }

    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            stringScratch.append(UInt8(scalar))
        case 0x80..<0x800:
            stringScratch.append(UInt8(0xC0 | (scalar >> 6)))
            stringScratch.append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            stringScratch.append(UInt8(0xE0 | (scalar >> 12)))
            stringScratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            stringScratch.append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            stringScratch.append(UInt8(0xF0 | (scalar >> 18)))
            stringScratch.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            stringScratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            stringScratch.append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }

    /// Validates one multi-byte UTF-8 sequence at `position` (RFC 3629: no overlong forms,
    /// no surrogates, nothing above U+10FFFF) and moves past it.
    @inline(__always)
    mutating func skipUTF8Sequence() throws(JSONParseError) {
        let b0 = input[position]
        let remaining = input.count - position
        @inline(__always) func continuation(_ offset: Int) -> UInt8? {
            offset < remaining ? input[position + offset] : nil
        }
        @inline(__always) func isContinuation(_ byte: UInt8?) -> Bool {
            guard let byte else { return false }
            return byte & 0xC0 == 0x80
        }
        switch b0 {
        case 0xC2...0xDF:
            if isContinuation(continuation(1)) {
                position += 2
                return
            }
        case 0xE0...0xEF:
            if let b1 = continuation(1), isContinuation(continuation(2)) {
                let valid: Bool
                switch b0 {
                case 0xE0: valid = b1 >= 0xA0 && b1 <= 0xBF
                case 0xED: valid = b1 >= 0x80 && b1 <= 0x9F
                default: valid = b1 & 0xC0 == 0x80
                }
                if valid {
                    position += 3
                    return
                }
            }
        case 0xF0...0xF4:
            if let b1 = continuation(1), isContinuation(continuation(2)), isContinuation(continuation(3)) {
                let valid: Bool
                switch b0 {
                case 0xF0: valid = b1 >= 0x90 && b1 <= 0xBF
                case 0xF4: valid = b1 >= 0x80 && b1 <= 0x8F
                default: valid = b1 & 0xC0 == 0x80
                }
                if valid {
                    position += 4
                    return
                }
            }
        default:
            break
        }
        throw fail("invalid UTF-8 (\(describeByte(at: position))); expected text in UTF-8")
    }

    // MARK: - Numbers

    mutating func parseNumber() throws(JSONParseError) -> JSON {
        let start = position
        var negative = false
        if input[position] == UInt8(ascii: "-") {
            negative = true
            position += 1
        }
        guard position < input.count, isDigit(input[position]) else {
            throw fail("invalid number; expected a digit after '-'", at: position)
        }
        // Integer part, accumulated while it fits.
        var magnitude: UInt64 = 0
        var overflow = false
        var significantDigits = 0
        if input[position] == UInt8(ascii: "0") {
            position += 1
            if position < input.count && isDigit(input[position]) {
                throw fail("invalid number; leading zeros are not allowed", at: start)
            }
        } else {
            while position < input.count, isDigit(input[position]) {
                let digit = UInt64(input[position] &- UInt8(ascii: "0"))
                if !overflow {
                    let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
                    let (sum, o2) = times10.addingReportingOverflow(digit)
                    if o1 || o2 { overflow = true } else { magnitude = sum }
                }
                significantDigits += 1
                position += 1
            }
        }
        var isInteger = true
        var fractionDigits = 0
        if position < input.count && input[position] == UInt8(ascii: ".") {
            isInteger = false
            position += 1
            guard position < input.count, isDigit(input[position]) else {
                throw fail("invalid number; expected a digit after the decimal point", at: position)
            }
            while position < input.count, isDigit(input[position]) {
                let digit = UInt64(input[position] &- UInt8(ascii: "0"))
                if !overflow {
                    let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
                    let (sum, o2) = times10.addingReportingOverflow(digit)
                    if o1 || o2 { overflow = true } else { magnitude = sum }
                }
                fractionDigits += 1
                position += 1
            }
        }
        var exponent = 0
        if position < input.count && (input[position] | 0x20) == UInt8(ascii: "e") {
            isInteger = false
            position += 1
            var exponentNegative = false
            if position < input.count && (input[position] == UInt8(ascii: "+") || input[position] == UInt8(ascii: "-")) {
                exponentNegative = input[position] == UInt8(ascii: "-")
                position += 1
            }
            guard position < input.count, isDigit(input[position]) else {
                throw fail("invalid number; expected a digit in the exponent", at: position)
            }
            while position < input.count, isDigit(input[position]) {
                if exponent < 100_000 {
                    exponent = exponent * 10 + Int(input[position] &- UInt8(ascii: "0"))
                }
                position += 1
            }
            if exponentNegative { exponent = -exponent }
        }
        if isInteger && !overflow {
            if negative {
                if magnitude <= UInt64(Int64.max) + 1 {
                    return .int(magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude))
                }
            } else if magnitude <= UInt64(Int64.max) {
                return .int(Int64(magnitude))
            }
        }
        // Exact fast path (Clinger): mantissa below 2^53 and a power of ten that is exact.
        let scale = exponent - fractionDigits
        if !overflow && magnitude < (1 << 53) && scale >= -22 && scale <= 22 {
            var value = Double(magnitude)
            if scale < 0 { value /= powersOfTen[-scale] } else { value *= powersOfTen[scale] }
            return .double(negative ? -value : value)
        }
        let value: Double
        if !overflow {
            value = EiselLemire.double(significand: magnitude, exponent: scale, negative: negative)
        } else {
            // More than 64 bits of significand: the C library's correctly rounded strtod.
            let text = String(decoding: UnsafeBufferPointer(rebasing: input[start..<position]), as: UTF8.self)
            value = Double(text) ?? .infinity
        }
        guard value.isFinite else {
            let text = String(decoding: UnsafeBufferPointer(rebasing: input[start..<position]), as: UTF8.self)
            throw fail("number \(JSONWriter.quoted(text)) is out of the range of a binary64 double", at: start)
        }
        return .double(value)
    }

    @inline(__always)
    func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") <= 9
    }
}

/// 10^0 … 10^22, all exactly representable as doubles.
let powersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
    1e18, 1e19, 1e20, 1e21, 1e22,
]

/// A stack over raw memory for the parser's members and elements: values are moved into the
/// finished object or array, not copied (no retain/release pairs).
struct ScratchStack<Element> {
    private var base: UnsafeMutablePointer<Element>
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        base = UnsafeMutablePointer<Element>.allocate(capacity: capacity)
    }

    @inline(__always)
    mutating func push(_ element: Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: element)
        count += 1
    }

    private mutating func grow() {
        let newCapacity = capacity * 2
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        newBase.moveInitialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    /// Moves the elements from `start` on into a new array and drops them from the stack.
    mutating func popContiguous(from start: Int) -> ContiguousArray<Element> {
        let n = count - start
        guard n > 0 else { return [] }
        let source = base + start
        count = start
        return ContiguousArray(unsafeUninitializedCapacity: n) { buffer, initialized in
            buffer.baseAddress!.moveInitialize(from: source, count: n)
            initialized = n
        }
    }

    /// Moves the elements from `start` on into a new array and drops them from the stack.
    mutating func popArray(from start: Int) -> [Element] {
        let n = count - start
        guard n > 0 else { return [] }
        let source = base + start
        count = start
        return [Element](unsafeUninitializedCapacity: n) { buffer, initialized in
            buffer.baseAddress!.moveInitialize(from: source, count: n)
            initialized = n
        }
    }

    /// Destroys what is left and frees the memory.
    func release() {
        base.deinitialize(count: count)
        base.deallocate()
    }
}

/// Flags (0x80 in a byte's position) the bytes of a little-endian word that end a plain run of
/// string contents: `"`, `\`, control characters and non-ASCII bytes. The lowest flag is exact
/// (borrows may set false flags only above a true one), so `trailingZeroBitCount / 8` is the
/// index of the first such byte.
@inline(__always)
func specialStringBytes(_ word: UInt64) -> UInt64 {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    let quote = word ^ (ones &* 0x22)
    let backslash = word ^ (ones &* 0x5C)
    let control = (word &- ones &* 0x20) & ~word
    let quotes = (quote &- ones) & ~quote
    let backslashes = (backslash &- ones) & ~backslash
    return (control | quotes | backslashes | word) & highs
}
