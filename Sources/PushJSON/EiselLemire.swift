/// Correctly rounded decimal → double for significands of up to 64 bits: the Eisel–Lemire
/// algorithm (Daniel Lemire, "Number Parsing at a Gigabyte per Second", Software: Practice and
/// Experience 51(8), 2021; Noble Mushtak and Daniel Lemire, "Fast number parsing without
/// fallback", 2023, which proves that one 128-bit product, refined once, always suffices).
enum EiselLemire {
    static let smallestPowerOfTen = -342
    static let largestPowerOfTen = 308

    /// The double nearest to `w × 10^q` (ties to even); infinite beyond the range.
    static func double(significand w: UInt64, exponent q: Int, negative: Bool) -> Double {
        let sign: UInt64 = negative ? 1 << 63 : 0
        if w == 0 || q < smallestPowerOfTen {
            return Double(bitPattern: sign)
        }
        if q > largestPowerOfTen {
            return negative ? -.infinity : .infinity
        }
        let leadingZeros = w.leadingZeroBitCount
        let normalized = w << UInt64(leadingZeros)
        let product = productApproximation(q, normalized)
        let upperBit = Int(product.high >> 63)
        let shift = UInt64(upperBit + 64 - 52 - 3)
        var mantissa = product.high >> shift
        var power2 = power(q) + upperBit - leadingZeros + 1023
        if power2 <= 0 {
            // Subnormal, or zero.
            if -power2 + 1 >= 64 { return Double(bitPattern: sign) }
            mantissa >>= UInt64(-power2 + 1)
            mantissa += mantissa & 1
            mantissa >>= 1
            // Rounding up may reach the smallest normal: the bit it sets is the exponent's.
            power2 = mantissa < (1 << 52) ? 0 : 1
            return Double(bitPattern: sign | mantissa | UInt64(power2) << 52)
        }
        // Exactly halfway between two doubles (only possible for small |q|): round to even.
        if product.low <= 1 && q >= -4 && q <= 23 && mantissa & 3 == 1 {
            if mantissa << shift == product.high { mantissa &= ~1 }
        }
        mantissa += mantissa & 1
        mantissa >>= 1
        if mantissa >= (2 << 52) {
            mantissa = 1 << 52
            power2 += 1
        }
        mantissa &= ~(1 << 52)
        if power2 >= 0x7FF {
            return negative ? -.infinity : .infinity
        }
        return Double(bitPattern: sign | mantissa | UInt64(power2) << 52)
    }

    /// floor(log2(10^q)) + 63, for q in the table's range.
    @inline(__always)
    static func power(_ q: Int) -> Int {
        (((152_170 + 65_536) &* q) >> 16) + 63
    }

    /// The high 128 bits of w × 5^q, refined with the next 64 bits of 5^q when the first
    /// product leaves the bits that matter undecided.
    @inline(__always)
    static func productApproximation(_ q: Int, _ w: UInt64) -> (high: UInt64, low: UInt64) {
        let index = (q - smallestPowerOfTen) &* 2
        return powersOfFive128.withUnsafeBufferPointer { table in
            var first = w.multipliedFullWidth(by: table[index])
            let precisionMask: UInt64 = 0xFFFF_FFFF_FFFF_FFFF >> 55
            if first.high & precisionMask == precisionMask {
                let second = w.multipliedFullWidth(by: table[index + 1])
                let (low, carry) = first.low.addingReportingOverflow(second.high)
                first.low = low
                if carry { first.high &+= 1 }
            }
            return (first.high, first.low)
        }
    }
}
