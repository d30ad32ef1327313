/// Where a service's log events go: a closure you bridge to swift-log, `os_log`, a file or a test's recorder.
///
/// It is called on whichever thread noticed the event (a caller's, the change watch's, a durable subscriber's
/// queue, a bridge subscriber's queue), so it must be quick and must not call back into the service and wait.
public typealias FeedLogger = @Sendable (FeedLogEvent) -> Void

/// One thing worth telling an operator: a change watch that lost its connection or got it back, a durable subscriber
/// retrying a failed pass, a change stream or the delivery falling back to the log, a slow command.
///
/// Events carry no secret: a database is named by its password-free location (as ``FeedLocation/description`` prints
/// it), and no bound value or row is logged beyond ids.
///
/// ```swift
/// var options = FeedOpenOptions()
/// let service = try FeedService(location: url, options: options) { event in
///     logger.log(level: event.level == .warning ? .warning : .info, "\(event.message)",
///                metadata: event.fields.mapValues { .string($0) })   // swift-log
/// }
/// ```
public struct FeedLogEvent: Sendable, Hashable, CustomStringConvertible {
    /// How much an operator should care, in swift-log's order.
    public enum Level: Int, Sendable, Hashable, Comparable, CustomStringConvertible {
        /// Detail for debugging.
        case debug
        /// Normal operation worth a line: a recovery, a service closing.
        case info
        /// Something degraded that FeedSync handles by itself (a retry, a fallback to the log, a slow command).
        case warning
        /// Something FeedSync cannot handle by itself: a followed database file replaced, events pruned before
        /// they could be delivered.
        case error

        /// Orders by severity.
        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }

        /// `debug`, `info`, `warning` or `error`.
        public var description: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            }
        }
    }

    /// What happened, as a stable dotted name (`changeWatch.failed`), for filtering and tests.
    public struct Kind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The dotted name.
        public let rawValue: String

        /// A kind from its dotted name.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The dotted name.
        public var description: String { rawValue }

        /// A change watch's pass failed (a lost connection, a busy database); it retries with a growing pause.
        /// Logged once per run of failures.
        public static let changeWatchFailed = Kind(rawValue: "changeWatch.failed")
        /// A change watch's pass succeeded again after failures.
        public static let changeWatchRecovered = Kind(rawValue: "changeWatch.recovered")
        /// A change watch stopped for good: the followed database file was deleted or replaced.
        public static let changeWatchStopped = Kind(rawValue: "changeWatch.stopped")
        /// A live durable subscriber's pass failed; it runs another after a pause.
        public static let subscriberRetrying = Kind(rawValue: "subscriber.retrying")
        /// A change stream's consumer fell so far behind that its buffer reached its cap: the buffered events were
        /// dropped, and the stream reads them from the log when the consumer asks for them.
        public static let streamFellBehind = Kind(rawValue: "stream.fellBehind")
        /// The bridge's delivery fell behind (a slow subscriber): committed events beyond the cap wait as a range of
        /// seqs, read from the log when delivery reaches them.
        public static let deliveryFellBehind = Kind(rawValue: "delivery.fellBehind")
        /// The log no longer continues what this process delivered (a failover to a standby that lacked the last
        /// commits, or a restored backup): delivery starts again from the log's head, and subscribers get
        /// ``EventBridge/historyRewrites``.
        public static let historyRewritten = Kind(rawValue: "history.rewritten")
        /// Delivery could not read a range of seqs from the log; it tries again after a pause.
        public static let deliveryReadFailed = Kind(rawValue: "delivery.readFailed")
        /// Events waiting to be delivered were pruned from the log before delivery read them; subscribers of
        /// ``EventBridge`` do not get them.
        public static let deliveryMissedPruned = Kind(rawValue: "delivery.missedPruned")
        /// A command took longer than ``FeedService/Configuration/slowCommandThreshold``.
        public static let slowCommand = Kind(rawValue: "command.slow")
        /// A query (a feed page, a post, events, status) took longer than
        /// ``FeedService/Configuration/slowCommandThreshold``.
        public static let slowQuery = Kind(rawValue: "query.slow")
        /// A PostgreSQL connection was found lost (a server restart, a network fault) and a new one replaced it.
        public static let reconnected = Kind(rawValue: "connection.reconnected")
        /// A PostgreSQL write transaction failed for a reason retrying cures (a serialization failure, a deadlock, a
        /// like batch to send again) and runs again.
        public static let writeRetried = Kind(rawValue: "write.retried")
        /// A replica's request to its source failed transiently (the source unreachable); it is tried again after a
        /// pause.
        public static let syncRetrying = Kind(rawValue: "sync.retrying")
        /// The service was closed.
        public static let serviceClosed = Kind(rawValue: "service.closed")
    }

    /// What happened.
    public let kind: Kind
    /// How much it matters.
    public let level: Level
    /// One line for people.
    public let message: String
    /// Values for machines (swift-log's metadata): `location`, `error`, `subscriber`, `milliseconds`, … as text.
    public let fields: [String: String]

    /// An event from its parts.
    public init(kind: Kind, level: Level, message: String, fields: [String: String] = [:]) {
        self.kind = kind
        self.level = level
        self.message = message
        self.fields = fields
    }

    /// `[level] kind: message key=value …`, the fields sorted by key.
    public var description: String {
        let pairs = fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return (["[\(level)] \(kind): \(message)"] + pairs).joined(separator: " ")
    }
}
