/// An object member name, ordered as SPEC §2 says (Webcom/Firebase key order).
///
/// Keys that are integers in canonical form (`0`, or an optional `-`, a non-zero digit and more
/// digits) within the signed 32-bit range come first, in numeric order; every other key follows,
/// ordered by its UTF-8 bytes.
///
/// Equality and hashing are on the UTF-8 bytes too. Swift's `String` compares by canonical
/// equivalence, under which `"é"` (U+00E9) equals `"e\u{301}"`; their serialisations differ, so
/// for JSON they are different keys.
public struct Key: Sendable, Hashable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The key as written.
    public let string: String

    @inlinable
    public init(_ string: String) {
        self.string = string
    }

    public init(stringLiteral value: String) {
        self.string = value
    }

    public var description: String { string }

    /// The key's value when it is an integer key in the sense of SPEC §2, else `nil`.
    @inlinable
    public var integerValue: Int32? {
        withUTF8Bytes(string) { Key.integerValue(of: $0) }
    }

    /// The integer value of a key given as UTF-8 bytes, or `nil` when it is not an integer key.
    @inlinable
    public static func integerValue(of bytes: UnsafeBufferPointer<UInt8>) -> Int32? {
        let count = bytes.count
        guard count > 0, count <= 11 else { return nil }
        var index = 0
        var negative = false
        if bytes[0] == UInt8(ascii: "-") {
            negative = true
            index = 1
            guard count > 1 else { return nil }
        }
        let first = bytes[index]
        if first == UInt8(ascii: "0") {
            // "0" alone is canonical; "-0" and "01" are not.
            return (count == 1) ? 0 : nil
        }
        guard first >= UInt8(ascii: "1"), first <= UInt8(ascii: "9") else { return nil }
        var value: Int64 = 0
        while index < count {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit <= 9 else { return nil }
            value = value * 10 + Int64(digit)
            index += 1
        }
        if negative { value = -value }
        guard value >= Int64(Int32.min), value <= Int64(Int32.max) else { return nil }
        return Int32(truncatingIfNeeded: value)
    }

    /// Three-way comparison in key order: negative, zero or positive.
    @inlinable
    public static func compare(_ lhs: Key, _ rhs: Key) -> Int {
        withUTF8Bytes(lhs.string) { a in
            withUTF8Bytes(rhs.string) { b in
                compareBytes(a, b)
            }
        }
    }

    /// Three-way comparison in key order of two keys given as UTF-8 bytes.
    @inlinable
    public static func compareBytes(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
        let ia = integerValue(of: a)
        let ib = integerValue(of: b)
        switch (ia, ib) {
        case let (x?, y?):
            return x < y ? -1 : (x == y ? 0 : 1)
        case (.some, nil):
            return -1
        case (nil, .some):
            return 1
        case (nil, nil):
            return lexicographicCompare(a, b)
        }
    }

    @inlinable
    public static func < (lhs: Key, rhs: Key) -> Bool {
        compare(lhs, rhs) < 0
    }

    @inlinable
    public static func == (lhs: Key, rhs: Key) -> Bool {
        utf8Equal(lhs.string, rhs.string)
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        withUTF8Bytes(string) { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Number of UTF-8 bytes of the key.
    @inlinable
    public var byteCount: Int { string.utf8.count }
}

/// Calls `body` with the UTF-8 bytes of `string` without copying native strings.
@inlinable
public func withUTF8Bytes<R>(_ string: String, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
    if let result = try string.utf8.withContiguousStorageIfAvailable(body) {
        return result
    }
    let copy = Array(string.utf8)
    return try copy.withUnsafeBufferPointer(body)
}

/// Byte equality of two strings' UTF-8 forms (not canonical equivalence).
@inlinable
public func utf8Equal(_ a: String, _ b: String) -> Bool {
    withUTF8Bytes(a) { x in
        withUTF8Bytes(b) { y in
            x.count == y.count && (x.count == 0 || memoryEqual(x.baseAddress!, y.baseAddress!, x.count))
        }
    }
}

/// Lexicographic comparison of byte strings: negative, zero or positive.
@inlinable
public func lexicographicCompare(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
    let n = min(a.count, b.count)
    var i = 0
    while i < n {
        let x = a[i]
        let y = b[i]
        if x != y { return x < y ? -1 : 1 }
        i += 1
    }
    return a.count < b.count ? -1 : (a.count == b.count ? 0 : 1)
}

/// Byte-order comparison of two strings' UTF-8 forms (SPEC §11.12: ids in byte order).
public func lexicographicCompareUTF8(_ a: String, _ b: String) -> Int {
    withUTF8Bytes(a) { x in withUTF8Bytes(b) { y in lexicographicCompare(x, y) } }
}

@inlinable
func memoryEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ count: Int) -> Bool {
    var i = 0
    while i < count {
        if a[i] != b[i] { return false }
        i += 1
    }
    return true
}
