extension Subscribers {
    /// How many values a subscriber still wants: a finite number or `.unlimited`.
    ///
    /// Arithmetic saturates: anything involving `.unlimited` stays `.unlimited` except
    /// subtracting `.unlimited` from a finite demand, which gives `.none`. Subtraction never
    /// goes below `.none`; additions and multiplications that overflow become `.unlimited`.
    ///
    /// ```swift
    /// var demand = Subscribers.Demand.max(2)
    /// demand += 1        // .max(3)
    /// demand -= 5        // .none
    /// ```
    public struct Demand: Sendable, Hashable, Comparable, CustomStringConvertible {
        /// The raw count; `Int.max` encodes `.unlimited`.
        @usableFromInline
        let rawValue: Int

        @inlinable
        init(rawValue: Int) {
            self.rawValue = rawValue
        }

        /// A demand for as many values as the publisher can produce.
        public static let unlimited = Demand(rawValue: .max)

        /// A demand for no values.
        public static let none = Demand(rawValue: 0)

        /// A demand for at most `value` values.
        ///
        /// - Precondition: `value >= 0`.
        @inlinable
        public static func max(_ value: Int) -> Demand {
            precondition(value >= 0, "API Violation: demand must not be negative")
            return Demand(rawValue: value)
        }

        /// The finite number of values requested, or `nil` for `.unlimited`.
        @inlinable
        public var max: Int? {
            rawValue == .max ? nil : rawValue
        }

        /// A textual form: `unlimited` or `max(n)`.
        public var description: String {
            rawValue == .max ? "unlimited" : "max(\(rawValue))"
        }

        // MARK: - Arithmetic with demands

        /// Adds two demands, saturating at `.unlimited`.
        @inlinable
        public static func + (lhs: Demand, rhs: Demand) -> Demand {
            if lhs.rawValue == .max || rhs.rawValue == .max { return .unlimited }
            let (sum, overflow) = lhs.rawValue.addingReportingOverflow(rhs.rawValue)
            return overflow ? .unlimited : Demand(rawValue: sum)
        }

        /// Subtracts a demand; `.unlimited` minus anything stays `.unlimited`, the result never goes below `.none`.
        @inlinable
        public static func - (lhs: Demand, rhs: Demand) -> Demand {
            if lhs.rawValue == .max { return .unlimited }
            if rhs.rawValue == .max { return .none }
            return Demand(rawValue: Swift.max(0, lhs.rawValue - rhs.rawValue))
        }

        /// Multiplies a demand by a non-negative count, saturating at `.unlimited`.
        @inlinable
        public static func * (lhs: Demand, rhs: Int) -> Demand {
            precondition(rhs >= 0, "API Violation: demand must not be multiplied by a negative number")
            if lhs.rawValue == .max { return .unlimited }
            let (product, overflow) = lhs.rawValue.multipliedReportingOverflow(by: rhs)
            return overflow || product == .max ? .unlimited : Demand(rawValue: product)
        }

        /// Adds a demand in place.
        @inlinable
        public static func += (lhs: inout Demand, rhs: Demand) {
            lhs = lhs + rhs
        }

        /// Subtracts a demand in place.
        @inlinable
        public static func -= (lhs: inout Demand, rhs: Demand) {
            lhs = lhs - rhs
        }

        /// Multiplies a demand in place.
        @inlinable
        public static func *= (lhs: inout Demand, rhs: Int) {
            lhs = lhs * rhs
        }

        // MARK: - Arithmetic with Int

        /// Adds a count of values, saturating at `.unlimited`.
        @inlinable
        public static func + (lhs: Demand, rhs: Int) -> Demand {
            rhs < 0 ? lhs - .max(-rhs) : lhs + .max(rhs)
        }

        /// Subtracts a count of values; never goes below `.none`.
        @inlinable
        public static func - (lhs: Demand, rhs: Int) -> Demand {
            rhs < 0 ? lhs + .max(-rhs) : lhs - .max(rhs)
        }

        /// Adds a count of values in place.
        @inlinable
        public static func += (lhs: inout Demand, rhs: Int) {
            lhs = lhs + rhs
        }

        /// Subtracts a count of values in place.
        @inlinable
        public static func -= (lhs: inout Demand, rhs: Int) {
            lhs = lhs - rhs
        }

        // MARK: - Comparison

        /// Orders demands; `.unlimited` is greater than every finite demand.
        @inlinable
        public static func < (lhs: Demand, rhs: Demand) -> Bool {
            lhs.rawValue < rhs.rawValue
        }

        /// Whether a demand equals a finite count (`.unlimited` equals no `Int`).
        @inlinable
        public static func == (lhs: Demand, rhs: Int) -> Bool {
            lhs.rawValue != .max && lhs.rawValue == rhs
        }

        /// Whether a demand differs from a finite count.
        @inlinable
        public static func != (lhs: Demand, rhs: Int) -> Bool {
            !(lhs == rhs)
        }

        /// Whether a count equals a finite demand.
        @inlinable
        public static func == (lhs: Int, rhs: Demand) -> Bool {
            rhs == lhs
        }

        /// Whether a count differs from a demand.
        @inlinable
        public static func != (lhs: Int, rhs: Demand) -> Bool {
            !(rhs == lhs)
        }

        /// Whether a demand is less than a count (`.unlimited` never is).
        @inlinable
        public static func < (lhs: Demand, rhs: Int) -> Bool {
            lhs.rawValue != .max && lhs.rawValue < rhs
        }

        /// Whether a demand is greater than a count (`.unlimited` always is).
        @inlinable
        public static func > (lhs: Demand, rhs: Int) -> Bool {
            lhs.rawValue == .max || lhs.rawValue > rhs
        }

        /// Whether a demand is at most a count.
        @inlinable
        public static func <= (lhs: Demand, rhs: Int) -> Bool {
            !(lhs > rhs)
        }

        /// Whether a demand is at least a count.
        @inlinable
        public static func >= (lhs: Demand, rhs: Int) -> Bool {
            !(lhs < rhs)
        }

        /// Whether a count is less than a demand.
        @inlinable
        public static func < (lhs: Int, rhs: Demand) -> Bool {
            rhs > lhs
        }

        /// Whether a count is greater than a demand.
        @inlinable
        public static func > (lhs: Int, rhs: Demand) -> Bool {
            rhs < lhs
        }

        /// Whether a count is at most a demand.
        @inlinable
        public static func <= (lhs: Int, rhs: Demand) -> Bool {
            rhs >= lhs
        }

        /// Whether a count is at least a demand.
        @inlinable
        public static func >= (lhs: Int, rhs: Demand) -> Bool {
            rhs <= lhs
        }
    }
}
