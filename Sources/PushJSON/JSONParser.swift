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

    /// Parses one JSON document in which no object repeats a key (a repeated key is an error,
    /// naming the key and where its object opens, instead of the last one winning): for inputs
    /// whose readers may disagree on which one counts and where it decides something (a
    /// notification payload, read rules, a token's claims and header, a request body, a key
    /// set; issue 33: `{".read":false,".read":true}` granted).
    public static func parseRejectingDuplicateKeys(_ bytes: [UInt8]) throws(JSONParseError) -> JSON {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in try parseRejectingDuplicateKeys(buffer) }
    }

    /// ``parseRejectingDuplicateKeys(_:)-([UInt8])`` over a buffer.
    public static func parseRejectingDuplicateKeys(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> JSON {
        var parser = JSONParser(bytes)
        parser.rejectDuplicateKeys = true
        defer { parser.release() }
        return try parser.parseDocument()
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
    /// The arrays and objects being parsed, innermost last.
    var containers = ScratchStack<Container>(capacity: 8)
    /// The keys of the members whose values are being parsed, innermost last.
    var pendingKeys = ScratchStack<Key>(capacity: 8)
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
        containers.release()
        pendingKeys.release()
    }

    mutating func parseDocument() throws(JSONParseError) -> JSON {
        skipWhitespace()
        guard position < input.count else {
            throw fail("empty input; expected a JSON value")
        }
        let value = try parseValue()
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

    /// An array or object being parsed. The parser keeps them on a stack of its own, not on
    /// the thread's, so a document's nesting does not decide how much of the thread's stack it
    /// uses (issue 33: the recursive parser overflowed a worker thread's stack at depth 1024
    /// under AddressSanitizer). Plain data: the key of the member being parsed waits on
    /// `pendingKeys` until its value is complete.
    struct Container {
        /// Where the `{` or `[` is.
        let open: Int
        /// Where its members or elements start on `memberStack` or `elementStack`.
        let base: Int
        let isObject: Bool
        /// Whether the members so far arrived in key order (then no sort is needed).
        var inOrder = true
        /// The raw bytes of the last key read, when it had no escapes: to check the order
        /// without decoding.
        var lastRaw: UnsafeBufferPointer<UInt8>?

        init(open: Int, base: Int, isObject: Bool) {
            self.open = open
            self.base = base
            self.isObject = isObject
        }
    }

    /// Parses the value at `position` (white space skipped), nested arrays and objects included,
    /// with a loop: down into each container that opens, up out of each one that closes.
    mutating func parseValue() throws(JSONParseError) -> JSON {
        var value: JSON
        descend: while true {
            guard position < input.count else {
                throw fail("unexpected end of input; expected a JSON value")
            }
            switch input[position] {
            case UInt8(ascii: "{"):
                let open = position
                if try openContainer(closedBy: UInt8(ascii: "}")) {
                    value = .object(JSONObject())
                } else {
                    var container = Container(open: open, base: memberStack.count, isObject: true)
                    try parseMemberKey(of: &container)
                    containers.push(container)
                    continue descend
                }
            case UInt8(ascii: "["):
                let open = position
                if try openContainer(closedBy: UInt8(ascii: "]")) {
                    value = .array([])
                } else {
                    containers.push(Container(open: open, base: elementStack.count, isObject: false))
                    continue descend
                }
            case UInt8(ascii: "\""):
                value = .string(try parseString())
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                value = try parseNumber()
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                value = .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                value = .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                value = .null
            default:
                throw fail(
                    "unexpected \(describeByte(at: position)); expected a JSON value (object, array, string, number, true, false or null)"
                )
            }
            // Up: the value completes a member or an element of the innermost container; each
            // container it closes is a value for the one around it.
            while containers.count > 0 {
                let container = containers.last
                if container.isObject {
                    memberStack.push(JSONObject.Member(pendingKeys.popLast(), value))
                } else {
                    elementStack.push(value)
                }
                skipWhitespace()
                guard position < input.count else {
                    throw container.isObject
                        ? fail("unexpected end of input in the object opened at byte \(container.open); expected ',' or '}'")
                        : fail("unexpected end of input in the array opened at byte \(container.open); expected ',' or ']'")
                }
                let byte = input[position]
                position += 1
                if container.isObject {
                    if byte == UInt8(ascii: ",") {
                        skipWhitespace()
                        var object = containers.popLast()
                        try parseMemberKey(of: &object)
                        containers.push(object)
                        continue descend
                    }
                    guard byte == UInt8(ascii: "}") else {
                        throw fail("unexpected \(describeByte(at: position - 1)); expected ',' or '}' after an object member", at: position - 1)
                    }
                    value = try finishObject(containers.popLast())
                } else {
                    if byte == UInt8(ascii: ",") {
                        skipWhitespace()
                        continue descend
                    }
                    guard byte == UInt8(ascii: "]") else {
                        throw fail("unexpected \(describeByte(at: position - 1)); expected ',' or ']' after an array element", at: position - 1)
                    }
                    value = .array(elementStack.popArray(from: containers.popLast().base))
                }
            }
            return value
        }
    }

    /// Steps over the `{` or `[` at `position` (refused one level past ``maxDepth``) and the
    /// white space after it; returns whether `close` follows at once (an empty container,
    /// stepped over too).
    mutating func openContainer(closedBy close: UInt8) throws(JSONParseError) -> Bool {
        if containers.count >= JSONParser.maxDepth {
            throw fail("nesting deeper than \(JSONParser.maxDepth) levels")
        }
        position += 1
        skipWhitespace()
        guard position < input.count && input[position] == close else { return false }
        position += 1
        return true
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

    /// Reads a member's key and its `:`, and puts the key on `pendingKeys` to wait for its
    /// value; leaves `position` at the value.
    mutating func parseMemberKey(of container: inout Container) throws(JSONParseError) {
        guard position < input.count else {
            throw fail("unexpected end of input in the object opened at byte \(container.open); expected a string key")
        }
        guard input[position] == UInt8(ascii: "\"") else {
            throw fail("unexpected \(describeByte(at: position)); expected a string key in double quotes")
        }
        let key = Key(try parseString())
        let raw = lastStringEscaped
            ? nil : UnsafeBufferPointer(rebasing: input[lastStringStart..<(position - 1)])
        if container.inOrder && memberStack.count > container.base {
            // After the first member: is this key after the previous one?
            let order: Int
            if let raw, let previousRaw = container.lastRaw {
                order = Key.compareBytes(previousRaw, raw)
            } else {
                order = Key.compare(memberStack.last.key, key)
            }
            if order >= 0 { container.inOrder = false }
        }
        container.lastRaw = raw
        pendingKeys.push(key)
        skipWhitespace()
        guard position < input.count, input[position] == UInt8(ascii: ":") else {
            throw fail("unexpected \(describeByte(at: position)); expected ':' after the object key")
        }
        position += 1
        skipWhitespace()
    }

    /// The object of `container`'s members (sorted when they did not arrive in key order).
    mutating func finishObject(_ container: Container) throws(JSONParseError) -> JSON {
        var entries = memberStack.popContiguous(from: container.base)
        if !container.inOrder {
            if rejectDuplicateKeys {
                var seen = Set<Key>(minimumCapacity: entries.count)
                for entry in entries where !seen.insert(entry.key).inserted {
                    var shown = String(entry.key.string.unicodeScalars.prefix(64).map { $0.properties.generalCategory == .control ? "?" : Character($0) })
                    if entry.key.string.unicodeScalars.count > 64 { shown += "…" }
                    throw fail("the object opened at byte \(container.open) repeats the key \"\(shown)\"; expected each key once", at: container.open)
                }
            }
            JSONObject.sortRemovingDuplicates(&entries)
        }
        return .object(JSONObject(root: BTreeNode.build(entries)))
    }
}
