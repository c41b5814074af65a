import PushJSON

/// A location in the data tree: a sequence of keys (SPEC §2).
///
/// Canonical form starts with `/`; the root is `/`; there is no trailing `/`. Parsing
/// normalises: empty segments and `.` are no-ops, `..` goes one level up (a no-op at the root),
/// so `a//b/./c/..` is `/a/b`. Every key is then checked (``Path/validateKey(_:)``) and the
/// canonical form may not exceed ``maxBytes``.
public struct Path: Sendable, Hashable, CustomStringConvertible {
    /// Longest canonical path, in UTF-8 bytes.
    public static let maxBytes = 2048
    /// Longest key, in UTF-8 bytes.
    public static let maxKeyBytes = 768

    /// The keys from the root down.
    public let keys: [Key]
    /// The canonical form.
    public let string: String

    public static let root = Path(uncheckedKeys: [])

    /// A path from keys already validated.
    public init(uncheckedKeys keys: [Key]) {
        self.keys = keys
        self.string = keys.isEmpty ? "/" : "/" + keys.map(\.string).joined(separator: "/")
    }

    /// Keys already validated with their canonical form.
    private init(keys: [Key], string: String) {
        self.keys = keys
        self.string = string
    }

    /// Parses, normalises and validates a path.
    public init(_ text: String) throws(PathError) {
        // One pass over the bytes; a text already in canonical form (the common case) is kept
        // as the path's string rather than joined again from its keys.
        var keys: [Key] = []
        let canonical = withUTF8Bytes(text) { bytes -> Bool in
            let slash = UInt8(ascii: "/")
            let dot = UInt8(ascii: ".")
            var canonical = bytes.first == slash
            var start = 0
            var first = true
            for end in 0...bytes.count where end == bytes.count || bytes[end] == slash {
                let length = end - start
                let segment = UnsafeBufferPointer(rebasing: bytes[start..<end])
                start = end + 1
                defer { first = false }
                if length == 0 {
                    // Before a leading `/` is where a canonical path starts; any other empty
                    // segment is normalised away (the root `/` alone is canonical).
                    if !first && bytes.count != 1 { canonical = false }
                    continue
                }
                if segment[0] == dot && (length == 1 || (length == 2 && segment[1] == dot)) {
                    canonical = false
                    if length == 2, !keys.isEmpty { keys.removeLast() }
                    continue
                }
                keys.append(Key(String(decoding: segment, as: UTF8.self)))
            }
            return canonical
        }
        for key in keys {
            try Path.validateKey(key)
        }
        if canonical {
            self.init(keys: keys, string: keys.isEmpty ? "/" : text)
        } else {
            self.init(uncheckedKeys: keys)
        }
        let length = string.utf8.count
        if length > Path.maxBytes {
            throw PathError(.pathTooLong(bytes: length))
        }
    }

    /// Parses a relative path strictly: one or more valid keys joined by `/`, with no empty,
    /// `.` or `..` segment (the keys of a `patch`, SPEC §11.2).
    public static func strictRelativeKeys(_ text: String) throws(PathError) -> [Key] {
        var keys: [Key] = []
        for segment in text.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if segment.isEmpty {
                throw PathError(.emptySegment(text))
            }
            if segment.elementsEqual(".".utf8) || segment.elementsEqual("..".utf8) {
                throw PathError(.dotSegment(text))
            }
            let key = Key(String(decoding: segment, as: UTF8.self))
            try validateKey(key)
            keys.append(key)
        }
        return keys
    }

    /// Checks one key: 1–768 bytes of UTF-8 without `. $ # [ ] /` or ASCII control characters.
    public static func validateKey(_ key: Key) throws(PathError) {
        let problem: PathError.Code? = withUTF8Bytes(key.string) { bytes -> PathError.Code? in
            if bytes.isEmpty { return .emptyKey }
            if bytes.count > maxKeyBytes { return .keyTooLong(key: key.string, bytes: bytes.count) }
            for byte in bytes where isForbiddenKeyByte(byte) {
                return .forbiddenCharacter(key: key.string, character: byte)
            }
            return nil
        }
        if let problem { throw PathError(problem) }
    }

    @inlinable
    static func isForbiddenKeyByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x00...0x1F, 0x7F, UInt8(ascii: "."), UInt8(ascii: "$"), UInt8(ascii: "#"), UInt8(ascii: "["),
            UInt8(ascii: "]"), UInt8(ascii: "/"):
            return true
        default:
            return false
        }
    }

    public var description: String { string }

    public var isRoot: Bool { keys.isEmpty }

    /// Number of keys.
    public var depth: Int { keys.count }

    /// The parent path; `nil` for the root.
    public var parent: Path? {
        keys.isEmpty ? nil : Path(uncheckedKeys: Array(keys.dropLast()))
    }

    /// This path with keys appended (not validated).
    public func appending(_ more: [Key]) -> Path {
        Path(uncheckedKeys: keys + more)
    }

    /// Whether this path is `other` or one of its ancestors.
    public func isPrefix(of other: Path) -> Bool {
        keys.count <= other.keys.count && zip(keys, other.keys).allSatisfy { $0 == $1 }
    }

    public static func == (lhs: Path, rhs: Path) -> Bool {
        lhs.keys == rhs.keys
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(keys)
    }
}
