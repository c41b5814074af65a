/// A growable byte buffer over raw memory, for the serialiser's inner loops: an append is a
/// capacity check and a store, with no uniqueness check or generic dispatch.
///
/// It does not own its memory: ``JSONWriter`` lends its storage to one for the length of a call
/// and takes back the (possibly reallocated) pointer afterwards.
@usableFromInline
package struct ByteSink {
    @usableFromInline package var base: UnsafeMutablePointer<UInt8>
    @usableFromInline package var count: Int
    @usableFromInline package var capacity: Int

    @inlinable
    package init(base: UnsafeMutablePointer<UInt8>, count: Int, capacity: Int) {
        self.base = base
        self.count = count
        self.capacity = capacity
    }

    /// Makes room for `extra` more bytes.
    @inlinable @inline(__always)
    package mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(extra) }
    }

    @usableFromInline
    package mutating func grow(_ extra: Int) {
        let newCapacity = max(capacity * 2, count + extra, 64)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.update(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    @inlinable @inline(__always)
    package mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inlinable @inline(__always)
    package mutating func append(_ a: UInt8, _ b: UInt8) {
        reserve(2)
        base[count] = a
        base[count + 1] = b
        count += 2
    }

    @inlinable @inline(__always)
    package mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (base + count).update(from: source, count: bytes.count)
        count += bytes.count
    }

    @inlinable @inline(__always)
    package mutating func append(_ text: StaticString) {
        append(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }
}

/// Storage of a ``JSONWriter``: raw memory it owns.
///
/// The buffer's pointer, count and capacity live behind a `let` pointer rather than in `var`
/// properties, so that reading and updating them is not subject to Swift's dynamic exclusivity
/// checks (which cost a runtime call per access to a class's stored `var`).
///
/// `@unchecked Sendable`: a `JSONWriter` mutates its storage only when it holds the sole
/// reference (copy-on-write), so no storage is ever mutated while another value can read it.
@usableFromInline
package final class ByteStorage: @unchecked Sendable {
    @usableFromInline package let state: UnsafeMutablePointer<ByteSink>

    @usableFromInline
    package init(capacity: Int) {
        let capacity = max(capacity, 16)
        state = UnsafeMutablePointer<ByteSink>.allocate(capacity: 1)
        state.initialize(to: ByteSink(base: UnsafeMutablePointer<UInt8>.allocate(capacity: capacity), count: 0, capacity: capacity))
    }

    @inlinable package var count: Int { state.pointee.count }
    @inlinable package var base: UnsafeMutablePointer<UInt8> { state.pointee.base }

    @usableFromInline
    package func copy() -> ByteStorage {
        let other = ByteStorage(capacity: state.pointee.capacity)
        other.state.pointee.base.update(from: state.pointee.base, count: state.pointee.count)
        other.state.pointee.count = state.pointee.count
        return other
    }

    deinit {
        state.pointee.base.deallocate()
        state.deinitialize(count: 1)
        state.deallocate()
    }
}

// MARK: - Escaping

/// How characters are escaped: ``PlainLevel`` writes JSON; ``NestedLevel`` writes JSON text as
/// the contents of a JSON string (every quote and backslash of the JSON escaped once more), so
/// a value can be written straight into a v1 payload's `d` field in one pass.
@usableFromInline
package protocol EscapeLevel {
    /// A double quote delimiting a string.
    static func quote(_ sink: inout ByteSink)
    /// The escape sequence of a byte that needs one (`"`, `\`, control characters).
    static func escape(_ byte: UInt8, _ sink: inout ByteSink)
}

@usableFromInline
package enum PlainLevel: EscapeLevel {
    @inlinable @inline(__always)
    package static func quote(_ sink: inout ByteSink) {
        sink.append(0x22)
    }

    @inlinable @inline(__always)
    package static func escape(_ byte: UInt8, _ sink: inout ByteSink) {
        switch byte {
        case 0x22: sink.append(0x5C, 0x22)
        case 0x5C: sink.append(0x5C, 0x5C)
        case 0x08: sink.append(0x5C, UInt8(ascii: "b"))
        case 0x0C: sink.append(0x5C, UInt8(ascii: "f"))
        case 0x0A: sink.append(0x5C, UInt8(ascii: "n"))
        case 0x0D: sink.append(0x5C, UInt8(ascii: "r"))
        case 0x09: sink.append(0x5C, UInt8(ascii: "t"))
        default:
            sink.append("\\u00")
            sink.append(hexDigit(byte >> 4), hexDigit(byte & 0xF))
        }
    }
}

@usableFromInline
package enum NestedLevel: EscapeLevel {
    @inlinable @inline(__always)
    package static func quote(_ sink: inout ByteSink) {
        sink.append(0x5C, 0x22)  // \"
    }

    @inlinable @inline(__always)
    package static func escape(_ byte: UInt8, _ sink: inout ByteSink) {
        switch byte {
        case 0x22: sink.append("\\\\\\\"")  // \" escaped again: \\\"
        case 0x5C: sink.append("\\\\\\\\")  // \\ escaped again: \\\\
        case 0x08: sink.append("\\\\b")
        case 0x0C: sink.append("\\\\f")
        case 0x0A: sink.append("\\\\n")
        case 0x0D: sink.append("\\\\r")
        case 0x09: sink.append("\\\\t")
        default:
            sink.append("\\\\u00")
            sink.append(hexDigit(byte >> 4), hexDigit(byte & 0xF))
        }
    }
}

@inlinable @inline(__always)
package func hexDigit(_ nibble: UInt8) -> UInt8 {
    nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
}

/// Whether any byte of the 8-byte word needs a JSON escape: below 0x20, `"` or `\`.
/// (Exact as to "any"; bytes of 0x80 and above never match.)
@inlinable @inline(__always)
package func wordNeedsEscape(_ word: UInt64) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    let below20 = (word &- ones &* 0x20) & ~word & highs
    let quote = word ^ (ones &* 0x22)
    let backslash = word ^ (ones &* 0x5C)
    let hasQuote = (quote &- ones) & ~quote & highs
    let hasBackslash = (backslash &- ones) & ~backslash & highs
    return (below20 | hasQuote | hasBackslash) != 0
}

@inlinable @inline(__always)
package func byteNeedsEscape(_ byte: UInt8) -> Bool {
    byte < 0x20 || byte == 0x22 || byte == 0x5C
}

extension ByteSink {
    /// Writes UTF-8 text as a quoted JSON string at the given escape level.
    @inlinable @inline(__always)
    package mutating func writeString<L: EscapeLevel>(_ text: UnsafeBufferPointer<UInt8>, _ level: L.Type) {
        guard let source = text.baseAddress, text.count > 0 else {
            L.quote(&self)
            L.quote(&self)
            return
        }
        let count = text.count
        let clean = firstByteNeedingEscape(source, count)
        if clean == count {
            // The usual case: nothing to escape; one reservation, one copy.
            reserve(count + 4)
            L.quote(&self)
            copyUnchecked(source, count)
            L.quote(&self)
            return
        }
        L.quote(&self)
        copyUnchecked(source, clean, reserving: true)
        writeEscapedTail(source + clean, count - clean, level)
        L.quote(&self)
    }

    /// Index of the first byte that needs an escape, or `count`.
    @inlinable @inline(__always)
    package func firstByteNeedingEscape(_ source: UnsafePointer<UInt8>, _ count: Int) -> Int {
        var i = 0
        while i + 8 <= count {
            if wordNeedsEscape(UnsafeRawPointer(source + i).loadUnaligned(as: UInt64.self)) { break }
            i += 8
        }
        while i < count {
            if byteNeedsEscape(source[i]) { return i }
            i += 1
        }
        return count
    }

    /// Appends bytes; with `reserving: false` the caller has reserved room already.
    @inlinable @inline(__always)
    package mutating func copyUnchecked(_ source: UnsafePointer<UInt8>, _ length: Int, reserving: Bool = false) {
        if reserving { reserve(length) }
        let destination = base + count
        if length <= 16 {
            if length >= 8 {
                // Two overlapping 8-byte moves cover 8...16 bytes.
                let head = UnsafeRawPointer(source).loadUnaligned(as: UInt64.self)
                let tail = UnsafeRawPointer(source + length - 8).loadUnaligned(as: UInt64.self)
                UnsafeMutableRawPointer(destination).storeBytes(of: head, as: UInt64.self)
                UnsafeMutableRawPointer(destination + length - 8).storeBytes(of: tail, as: UInt64.self)
            } else {
                for i in 0..<length { destination[i] = source[i] }
            }
        } else {
            destination.update(from: source, count: length)
        }
        count += length
    }

    /// Writes string contents from the first byte needing an escape on.
    @inlinable
    package mutating func writeEscapedTail<L: EscapeLevel>(_ source: UnsafePointer<UInt8>, _ count: Int, _: L.Type) {
        var runStart = 0
        var i = 0
        while i < count {
            if i + 8 <= count, !wordNeedsEscape(UnsafeRawPointer(source + i).loadUnaligned(as: UInt64.self))
            {
                i += 8
                continue
            }
            let byte = source[i]
            if byteNeedsEscape(byte) {
                if runStart < i { copyUnchecked(source + runStart, i - runStart, reserving: true) }
                L.escape(byte, &self)
                runStart = i + 1
            }
            i += 1
        }
        if runStart < count { copyUnchecked(source + runStart, count - runStart, reserving: true) }
    }

    @inlinable
    package mutating func writeString<L: EscapeLevel>(_ text: String, _ level: L.Type) {
        withUTF8Bytes(text) { writeString($0, level) }
    }

    /// Writes a decimal integer.
    @inlinable
    package mutating func writeInt(_ value: Int64) {
        if value >= 0 && value < 10 {
            append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value))
            return
        }
        reserve(20)
        var magnitude = value.magnitude
        var digits = 0
        var probe = magnitude
        repeat {
            digits += 1
            probe /= 10
        } while probe != 0
        var position = count + digits + (value < 0 ? 1 : 0)
        if value < 0 { base[count] = UInt8(ascii: "-") }
        let end = position
        repeat {
            position -= 1
            base[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
            magnitude /= 10
        } while magnitude != 0
        count = end
    }

    /// Writes a value at the given escape level; objects in key order.
    @inlinable
    package mutating func write<L: EscapeLevel>(_ value: JSON, _ level: L.Type) {
        switch value {
        case .null:
            append("null")
        case .bool(let flag):
            if flag { append("true") } else { append("false") }
        case .int(let number):
            writeInt(number)
        case .double(let number):
            writeDouble(number)
        case .string(let text):
            writeString(text, level)
        case .array(let elements):
            append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { append(UInt8(ascii: ",")) }
                first = false
                write(element, level)
            }
            append(UInt8(ascii: "]"))
        case .object(let object):
            append(UInt8(ascii: "{"))
            var first = true
            writeMembers(object.root, level, &first)
            append(UInt8(ascii: "}"))
        }
    }

    @inlinable
    mutating func writeMembers<L: EscapeLevel>(_ node: BTreeNode, _ level: L.Type, _ first: inout Bool) {
        switch node {
        case .leaf(let members):
            members.withUnsafeBufferPointer { buffer in
                for index in buffer.indices {
                    if !first { append(UInt8(ascii: ",")) }
                    first = false
                    writeString(buffer[index].key.string, level)
                    append(UInt8(ascii: ":"))
                    write(buffer[index].value, level)
                }
            }
        case .inner(let inner):
            for child in inner.children {
                writeMembers(child, level, &first)
            }
        }
    }
}
