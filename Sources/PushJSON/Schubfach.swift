/// Shortest decimal representation of a double: Raffaello Giulietti's Schubfach algorithm
/// ("The Schubfach way to render doubles", 2020; the algorithm of OpenJDK's `Double.toString`).
///
/// For a finite, non-zero double it finds the decimal `f × 10^e` with the fewest digits that
/// reads back to the same double, and of those the closest to it (ties to an even `f`): the
/// same digits Swift's `Double.description` and Python's `repr` produce, without allocating.
@usableFromInline
enum Schubfach {
    static let qMin = -1074
    static let cMin: UInt64 = 1 << 52
    static let kMin = -324
    static let cTiny: UInt64 = 3
    static let mask63: UInt64 = (1 << 63) - 1

    /// `(f, e)` with |value| = f × 10^e. `value` must be finite and non-zero.
    @usableFromInline
    static func decimal(_ value: Double) -> (significand: UInt64, exponent: Int) {
        let bits = value.bitPattern
        let t = bits & ((1 << 52) - 1)
        let bq = Int((bits >> 52) & 0x7FF)
        if bq != 0 {
            let mq = -qMin + 1 - bq
            let c = cMin | t
            // Integers below 2^53: exact.
            if 0 < mq && mq < 53 {
                let f = c >> UInt64(mq)
                if f << UInt64(mq) == c { return (f, 0) }
            }
            return toDecimal(q: -mq, c: c, dk: 0)
        }
        // Subnormal. The two smallest (c below C_TINY) fall outside the table's range; their
        // shortest forms are 5e-324 and 1e-323. (OpenJDK scales them by ten instead, which
        // yields its traditional two-digit "4.9E-324", not the shortest.)
        if t < cTiny { return t == 1 ? (5, -324) : (1, -323) }
        return toDecimal(q: qMin, c: t, dk: 0)
    }

    @inline(__always)
    static func flog10pow2(_ e: Int) -> Int { (e &* 661_971_961_083) >> 41 }

    @inline(__always)
    static func flog10ThreeQuartersPow2(_ e: Int) -> Int { (e &* 661_971_961_083 &+ -274_743_187_321) >> 41 }

    @inline(__always)
    static func flog2pow10(_ e: Int) -> Int { (e &* 913_124_641_741) >> 38 }

    /// Rounds g × cp / 2^127 to odd (section 9.8.3 of the paper).
    @inline(__always)
    static func roundToOdd(_ g1: UInt64, _ g0: UInt64, _ cp: UInt64) -> UInt64 {
        let x1 = g0.multipliedFullWidth(by: cp).high
        let y = g1.multipliedFullWidth(by: cp)
        let z = (y.low >> 1) &+ x1
        let vbp = y.high &+ (z >> 63)
        return vbp | (((z & mask63) &+ mask63) >> 63)
    }

    static func toDecimal(q: Int, c: UInt64, dk: Int) -> (significand: UInt64, exponent: Int) {
        let out = c & 1
        let cb = c << 2
        let cbr = cb + 2
        let cbl: UInt64
        let k: Int
        if c != cMin || q == qMin {
            // Regular spacing.
            cbl = cb - 2
            k = flog10pow2(q)
        } else {
            // Irregular spacing (a power of two: the gap below is half the gap above).
            cbl = cb - 1
            k = flog10ThreeQuartersPow2(q)
        }
        let h = UInt64(q + flog2pow10(-k) + 2)
        let index = (k - kMin) &* 2
        let (g1, g0) = schubfachTable.withUnsafeBufferPointer { ($0[index], $0[index + 1]) }
        let vb = roundToOdd(g1, g0, cb << h)
        let vbl = roundToOdd(g1, g0, cbl << h)
        let vbr = roundToOdd(g1, g0, cbr << h)
        let s = vb >> 2
        // Java requires two digits and tests s >= 100 here; for the shortest form (a single
        // digit for some subnormals) any s >= 10 may lose a digit. The rounding interval is
        // narrower than 10^(k+1), so it holds at most one multiple of it: sp10 or tp10.
        if s >= 10 {
            // s' = floor(s / 10); sp10 = 10 s', tp10 = 10 (s' + 1): one digit fewer, if it fits.
            let sp10 = 10 &* s.multipliedFullWidth(by: 1_844_674_407_370_955_168).high
            let tp10 = sp10 &+ 10
            let upin = vbl &+ out <= sp10 << 2
            let wpin = (tp10 << 2) &+ out <= vbr
            if upin != wpin {
                return (upin ? sp10 : tp10, k)
            }
        }
        let t = s &+ 1
        let uin = vbl &+ out <= s << 2
        let win = (t << 2) &+ out <= vbr
        if uin != win {
            return (uin ? s : t, k + dk)
        }
        // Both candidates are in the rounding interval: the closer one, ties to even.
        let cmp = Int64(bitPattern: vb &- ((s &+ t) << 1))
        return ((cmp < 0 || (cmp == 0 && s & 1 == 0)) ? s : t, k + dk)
    }
}

extension ByteSink {
    /// Writes a double as SPEC §7.1 says: an integral value below 2^53 in magnitude as an
    /// integer; any other value with its shortest round-trip digits, in decimal notation when
    /// 1e-4 ≤ |x| < 1e16, otherwise as `d.ddde±NN`.
    @usableFromInline
    mutating func writeDouble(_ value: Double) {
        precondition(value.isFinite, "JSON has no NaN or infinity")
        if JSONWriter.isWrittenAsInteger(value) {
            writeInt(Int64(value))
            return
        }
        var (significand, exponent) = Schubfach.decimal(value.magnitude)
        while significand % 10 == 0 {
            significand /= 10
            exponent += 1
        }
        reserve(32)
        // Digits of the significand, most significant first, in a local buffer.
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let count = withUnsafeMutableBytes(of: &digits) { raw -> Int in
            var n = 0
            var rest = significand
            repeat {
                n += 1
                rest /= 10
            } while rest != 0
            rest = significand
            var position = n
            repeat {
                position -= 1
                raw[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest != 0
            return n
        }
        // Exponent of the first digit: |x| = d.ddd × 10^point.
        let point = exponent + count - 1
        if value < 0 { append(UInt8(ascii: "-")) }
        withUnsafeBytes(of: &digits) { raw in
            let digit = raw.bindMemory(to: UInt8.self)
            if point >= -4 && point < 16 {
                if point >= 0 {
                    for i in 0...point { append(i < count ? digit[i] : UInt8(ascii: "0")) }
                    append(UInt8(ascii: "."))
                    if count > point + 1 {
                        append(UnsafeBufferPointer(rebasing: digit[(point + 1)..<count]))
                    } else {
                        append(UInt8(ascii: "0"))
                    }
                } else {
                    append(UInt8(ascii: "0"), UInt8(ascii: "."))
                    for _ in 0..<(-point - 1) { append(UInt8(ascii: "0")) }
                    append(UnsafeBufferPointer(rebasing: digit[0..<count]))
                }
            } else {
                append(digit[0])
                if count > 1 {
                    append(UInt8(ascii: "."))
                    append(UnsafeBufferPointer(rebasing: digit[1..<count]))
                }
                append(UInt8(ascii: "e"))
                append(point < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+"))
                let magnitude = abs(point)
                if magnitude < 10 { append(UInt8(ascii: "0")) }
                writeInt(Int64(magnitude))
            }
        }
    }
}
