/// Base64url without padding (RFC 4648 §5, as RFC 7515 §2 uses it).
public enum Base64URL {
    @usableFromInline
    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// 255 marks a byte outside the alphabet.
    @usableFromInline
    static let values: [UInt8] = {
        var table = [UInt8](repeating: 255, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// Length of the encoding of `count` bytes.
    @inlinable
    public static func encodedLength(_ count: Int) -> Int {
        (count * 4 + 2) / 3
    }

    /// Appends the encoding of `bytes` to `out`.
    public static func encode(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        let count = bytes.count
        let start = out.count
        let length = encodedLength(count)
        out.append(contentsOf: repeatElement(0, count: length))
        alphabet.withUnsafeBufferPointer { table in
            out.withUnsafeMutableBufferPointer { buffer in
                var o = start
                var i = 0
                while i + 3 <= count {
                    let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                    buffer[o] = table[Int(v >> 18)]
                    buffer[o + 1] = table[Int((v >> 12) & 63)]
                    buffer[o + 2] = table[Int((v >> 6) & 63)]
                    buffer[o + 3] = table[Int(v & 63)]
                    o += 4
                    i += 3
                }
                let rest = count - i
                if rest == 1 {
                    let v = UInt32(bytes[i]) << 16
                    buffer[o] = table[Int(v >> 18)]
                    buffer[o + 1] = table[Int((v >> 12) & 63)]
                } else if rest == 2 {
                    let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
                    buffer[o] = table[Int(v >> 18)]
                    buffer[o + 1] = table[Int((v >> 12) & 63)]
                    buffer[o + 2] = table[Int((v >> 6) & 63)]
                }
            }
        }
    }

    /// The encoding of `bytes`, as ASCII bytes.
    public static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> [UInt8] {
        let array = Array(bytes)
        var out: [UInt8] = []
        out.reserveCapacity(encodedLength(array.count))
        array.withUnsafeBytes { encode($0, into: &out) }
        return out
    }

    /// The encoding of `bytes`, as a string.
    public static func encodeToString<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        String(decoding: encode(bytes), as: UTF8.self)
    }

    /// Decodes strictly: only the URL-safe alphabet, no padding, no white space, and unused
    /// trailing bits zero (so every byte string has exactly one encoding). `nil` otherwise.
    public static func decode<Text: Collection<UInt8>>(_ text: Text) -> [UInt8]? {
        let input = Array(text)
        let count = input.count
        if count % 4 == 1 { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(count * 3 / 4)
        return values.withUnsafeBufferPointer { table -> [UInt8]? in
            var i = 0
            while i + 4 <= count {
                let a = table[Int(input[i])], b = table[Int(input[i + 1])]
                let c = table[Int(input[i + 2])], d = table[Int(input[i + 3])]
                if (a | b | c | d) == 255 { return nil }
                let v = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                out.append(UInt8(v >> 16))
                out.append(UInt8((v >> 8) & 0xFF))
                out.append(UInt8(v & 0xFF))
                i += 4
            }
            let rest = count - i
            if rest == 2 {
                let a = table[Int(input[i])], b = table[Int(input[i + 1])]
                if (a | b) == 255 || b & 0x0F != 0 { return nil }
                out.append(a << 2 | b >> 4)
            } else if rest == 3 {
                let a = table[Int(input[i])], b = table[Int(input[i + 1])], c = table[Int(input[i + 2])]
                if (a | b | c) == 255 || c & 0x03 != 0 { return nil }
                out.append(a << 2 | b >> 4)
                out.append((b & 0x0F) << 4 | c >> 2)
            }
            return out
        }
    }

    /// Decodes a string strictly; see ``decode(_:)``.
    public static func decode(_ text: String) -> [UInt8]? {
        decode(Array(text.utf8))
    }
}
