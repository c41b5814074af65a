extension JSONParser {
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
