/// The compact serialiser of SPEC §7.1.
///
/// No white space; UTF-8 with non-ASCII written as is; `/` not escaped; `"` `\` and the control
/// characters escaped (`\b \f \n \r \t`, others as `\u00xx` in lowercase hex); objects in key
/// order (``JSONObject`` keeps them so); doubles as ``writeDouble(_:)`` says.
///
/// A value type (copy-on-write) over raw memory: each call checks uniqueness once, then the
/// inner loops append without further checks.
public struct JSONWriter: Sendable {
    @usableFromInline var storage: ByteStorage

    public init(capacity: Int = 256) {
        storage = ByteStorage(capacity: capacity)
    }

    /// Runs `body` with the buffer, after making it unique.
    @inlinable
    package mutating func withSink<R>(_ body: (inout ByteSink) throws -> R) rethrows -> R {
        if !isKnownUniquelyReferenced(&storage) {
            storage = storage.copy()
        }
        return try body(&storage.state.pointee)
    }

    /// Number of bytes written.
    @inlinable public var count: Int { storage.count }

    /// The bytes written, as an array.
    public var bytes: [UInt8] {
        withUnsafeBytes { Array($0) }
    }

    /// The bytes written, as a string.
    public var string: String {
        withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with the bytes written.
    @inlinable
    public func withUnsafeBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try body(UnsafeBufferPointer(start: storage.base, count: storage.count))
    }

    public mutating func removeAll() {
        truncate(to: 0)
    }

    /// Drops what was written after the first `count` bytes.
    public mutating func truncate(to count: Int) {
        precondition(count >= 0 && count <= storage.count, "truncate beyond the written bytes")
        withSink { $0.count = count }
    }

    // MARK: - Raw output

    /// Appends ASCII text as is (punctuation, field names known not to need escapes).
    @inlinable
    public mutating func raw(_ text: StaticString) {
        withSink { $0.append(text) }
    }

    @inlinable
    public mutating func raw(_ byte: UInt8) {
        withSink { $0.append(byte) }
    }

    /// Appends bytes as is.
    @inlinable
    public mutating func raw(_ bytes: UnsafeBufferPointer<UInt8>) {
        withSink { $0.append(bytes) }
    }

    /// Appends bytes as is.
    public mutating func raw(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in withSink { $0.append(buffer) } }
    }

    // MARK: - Values

    /// Writes a value in compact form.
    public mutating func write(_ value: JSON) {
        withSink { $0.write(value, PlainLevel.self) }
    }

    /// Writes an object, members in key order.
    public mutating func write(_ object: JSONObject) {
        write(.object(object))
    }

    /// Writes the compact JSON text of `value` as a JSON string (in double quotes, its quotes
    /// and backslashes escaped): a v1 payload's `d` field, in one pass.
    public mutating func writeAsJSONString(_ value: JSON) {
        withSink { sink in
            sink.append(0x22)
            sink.write(value, NestedLevel.self)
            sink.append(0x22)
        }
    }

    /// Writes a decimal integer.
    public mutating func writeInt(_ value: Int64) {
        withSink { $0.writeInt(value) }
    }

    /// Writes a double: an integral value below 2^53 in magnitude as an integer (`1.0` → `1`,
    /// `-0.0` → `0`); any other with the shortest digits that read back to the same double, in
    /// decimal notation when 1e-4 ≤ |x| < 1e16 (`0.1`, `9007199254740994.0`), otherwise as
    /// `d.ddde±NN` (`1e+21`, `1e-07`). Swift's `Double.description` has the same digits but
    /// switches to exponents at 2^53, not 1e16, hence our own formatting.
    public mutating func writeDouble(_ value: Double) {
        withSink { $0.writeDouble(value) }
    }

    // MARK: - Strings

    /// Writes a string in double quotes with the escapes of SPEC §7.1.
    public mutating func writeString(_ text: String) {
        withUTF8Bytes(text) { writeEscaped($0) }
    }

    /// Writes UTF-8 bytes as a JSON string in double quotes, escaping as SPEC §7.1 says.
    public mutating func writeEscaped(_ text: UnsafeBufferPointer<UInt8>) {
        withSink { $0.writeString(text, PlainLevel.self) }
    }

    /// Whether SPEC §7.1 writes this double as an integer: integral and below 2^53 in magnitude.
    @inlinable
    public static func isWrittenAsInteger(_ value: Double) -> Bool {
        value.rounded(.towardZero) == value && abs(value) < 9_007_199_254_740_992
    }

    /// Longest part of an input that a message echoes, in UTF-8 bytes.
    public static let excerptBytes = 96

    /// `text` in double quotes, escaped as JSON writes it: for messages, where control
    /// characters and quotes must show. A text longer than ``excerptBytes`` is cut (at a
    /// character boundary) and followed by `…` and its length, so that a message never echoes a
    /// huge input whole.
    public static func quoted(_ text: String) -> String {
        let length = text.utf8.count
        var writer = JSONWriter(capacity: min(length, excerptBytes) + 24)
        if length <= excerptBytes {
            writer.writeString(text)
            return writer.string
        }
        writer.writeString(String(decoding: utf8Prefix(text.utf8, maxBytes: excerptBytes), as: UTF8.self))
        return writer.string + "… (\(length) bytes)"
    }

    /// The longest prefix of valid UTF-8 `bytes` of at most `maxBytes` bytes that ends on a
    /// character (scalar) boundary.
    public static func utf8Prefix(_ bytes: some Collection<UInt8>, maxBytes: Int) -> [UInt8] {
        var prefix = Array(bytes.prefix(maxBytes))
        guard prefix.count == maxBytes, prefix.count < bytes.count else { return prefix }
        // Find where the last scalar starts; drop it unless it is complete.
        var start = prefix.count - 1
        while start > 0 && prefix[start] & 0xC0 == 0x80 { start -= 1 }
        let lead = prefix[start]
        let length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2
        if start + length > prefix.count { prefix.removeSubrange(start...) }
        return prefix
    }
}

extension JSON {
    /// The compact serialisation for a message: cut after ``JSONWriter/excerptBytes`` bytes
    /// (followed by `…` and the full length), so that a message never echoes a huge value whole.
    public var excerpt: String {
        var writer = JSONWriter(capacity: 128)
        writer.write(self)
        let length = writer.count
        if length <= JSONWriter.excerptBytes { return writer.string }
        let bytes = JSONWriter.utf8Prefix(writer.bytes, maxBytes: JSONWriter.excerptBytes)
        return String(decoding: bytes, as: UTF8.self) + "… (\(length) bytes)"
    }
}
