extension Int64 {
    /// `self + other`, clamped to `Int64.min ... Int64.max` instead of trapping: for times computed from values that
    /// come from outside (settings, requests, records).
    public func addingSaturating(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
