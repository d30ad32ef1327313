extension Publisher where Output: Sendable {
    /// The publisher's values as a lossless `AsyncSequence` (unbounded buffer).
    ///
    /// ```swift
    /// for await event in bridge.likePublisher.values { apply(event) }
    /// ```
    public var values: AsyncPublisher<Self> {
        AsyncPublisher(upstream: self)
    }

    /// The publisher's values as an `AsyncSequence` with the given buffering policy.
    ///
    /// ```swift
    /// let recent = ticks.values(bufferingPolicy: .bounded(100, whenFull: .dropOldest))
    /// for await tick in recent { … }
    /// print(recent.droppedCount)
    /// ```
    public func values(bufferingPolicy: ValuesBufferingPolicy) -> AsyncPublisher<Self> {
        AsyncPublisher(upstream: self, bufferingPolicy: bufferingPolicy)
    }
}
