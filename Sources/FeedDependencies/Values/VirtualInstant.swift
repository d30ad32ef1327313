/// A point on the timeline of a ``TestClock`` or ``ImmediateClock``: a duration since the
/// clock's origin (``zero``).
public struct VirtualInstant: InstantProtocol, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// How far this instant is from the origin.
    public var offset: Duration

    /// Creates the instant `offset` after the origin.
    public init(offset: Duration) {
        self.offset = offset
    }

    /// The origin, where new clocks start.
    public static let zero = VirtualInstant(offset: .zero)

    /// The instant `duration` later.
    public func advanced(by duration: Duration) -> VirtualInstant {
        VirtualInstant(offset: offset + duration)
    }

    /// The duration from this instant to `other`.
    public func duration(to other: VirtualInstant) -> Duration {
        other.offset - offset
    }

    /// Orders instants by their offset.
    public static func < (lhs: VirtualInstant, rhs: VirtualInstant) -> Bool {
        lhs.offset < rhs.offset
    }

    /// The offset, e.g. `1.0 seconds`.
    public var description: String {
        offset.description
    }
}
