extension Int64 {
    /// `self + other`, clamped to `Int64.min ... Int64.max` instead of trapping: for numbers that
    /// come from outside (token claims, configured durations, client timestamps), where an
    /// overflow must not become a crash.
    @inlinable
    public func saturatingAdding(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        if !overflow { return sum }
        return other > 0 ? .max : .min
    }

    /// `self - other`, clamped like ``saturatingAdding(_:)``.
    @inlinable
    public func saturatingSubtracting(_ other: Int64) -> Int64 {
        let (difference, overflow) = subtractingReportingOverflow(other)
        if !overflow { return difference }
        return other < 0 ? .max : .min
    }

    /// `self * other`, clamped like ``saturatingAdding(_:)``.
    @inlinable
    public func saturatingMultiplying(_ other: Int64) -> Int64 {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        if !overflow { return product }
        return (self < 0) == (other < 0) ? .max : .min
    }
}

extension Duration {
    /// Whole milliseconds, saturated (a configured or provider-given duration cannot trap).
    @inlinable
    public var wholeMilliseconds: Int64 {
        components.seconds.saturatingMultiplying(1_000).saturatingAdding(components.attoseconds / 1_000_000_000_000_000)
    }
}
