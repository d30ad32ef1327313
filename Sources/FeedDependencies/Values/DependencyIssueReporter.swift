import Foundation

/// Where dependency problems go: an unimplemented test value, a key without a live value used
/// live, or a client's own ``DependencyValues/reportIssue(_:)``.
///
/// Defaults: ``fatal`` in the ``DependencyContext/test`` context, so an un-overridden test fails
/// loudly; ``standardError`` in the live and preview contexts. A test suite can install a
/// reporter that records a test issue instead (`$0.issueReporter = DependencyIssueReporter {
/// Issue.record(Comment(rawValue: $0)) }`).
public struct DependencyIssueReporter: Sendable {
    /// Receives the message.
    private let sink: @Sendable (String) -> Void

    /// Creates a reporter that hands every message to `sink`.
    public init(_ sink: @escaping @Sendable (String) -> Void) {
        self.sink = sink
    }

    /// Reports `message`.
    public func report(_ message: String) {
        sink(message)
    }

    /// Stops the process with the message.
    public static let fatal = DependencyIssueReporter { message in
        fatalError(message)
    }

    /// Writes the message, prefixed with `warning: `, to standard error and carries on.
    public static let standardError = DependencyIssueReporter { message in
        FileHandle.standardError.write(Data("warning: \(message)\n".utf8))
    }
}

extension DependencyIssueReporter: DependencyKey {
    /// Live: write a warning to standard error.
    public static let liveValue = DependencyIssueReporter.standardError
    /// Preview: write a warning to standard error.
    public static let previewValue = DependencyIssueReporter.standardError
    /// Test: stop the process, so an unimplemented dependency cannot pass unnoticed.
    public static let testValue = DependencyIssueReporter.fatal
}

extension DependencyValues {
    /// Where dependency problems are reported; see ``DependencyIssueReporter``.
    public var issueReporter: DependencyIssueReporter {
        get { self[DependencyIssueReporter.self] }
        set { self[DependencyIssueReporter.self] = newValue }
    }
}
