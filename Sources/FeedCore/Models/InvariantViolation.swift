/// One broken invariant found by `InvariantChecker`.
public struct InvariantViolation: Sendable, Hashable, CustomStringConvertible {
    /// Which rule is broken, such as `like-count`.
    public let rule: String
    /// What was found.
    public let detail: String

    /// Creates a violation.
    public init(rule: String, detail: String) {
        self.rule = rule
        self.detail = detail
    }

    /// `rule: detail`.
    public var description: String { "\(rule): \(detail)" }
}
