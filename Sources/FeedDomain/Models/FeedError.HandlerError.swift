extension FeedError {
    /// What application code that FeedSync ran — a durable subscriber's handler or rebuild — threw, kept as thrown.
    ///
    /// ``FeedError`` is `Hashable` and an `any Error` is not, so the error is compared and hashed by its type and
    /// its description, taken when it was caught: two handler errors are equal when they have the same type and
    /// print the same. To act on your own error, cast ``error``.
    ///
    /// ```swift
    /// catch FeedError.handlerFailed(let name, let seq, let failure) {
    ///     if let mailError = failure.error as? MailError { … }
    /// }
    /// ```
    public struct HandlerError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The error as the handler threw it.
        public let error: any Error
        /// `String(describing: error)`, taken when it was caught.
        public let description: String
        /// The thrown error's type, for equality.
        private let type: ObjectIdentifier

        /// Wraps what a handler threw.
        public init(_ error: any Error) {
            self.error = error
            description = String(describing: error)
            type = ObjectIdentifier(Swift.type(of: error))
        }

        /// Same type and same description.
        public static func == (lhs: HandlerError, rhs: HandlerError) -> Bool {
            lhs.type == rhs.type && lhs.description == rhs.description
        }

        /// Hashes the type and the description.
        public func hash(into hasher: inout Hasher) {
            hasher.combine(type)
            hasher.combine(description)
        }
    }
}
