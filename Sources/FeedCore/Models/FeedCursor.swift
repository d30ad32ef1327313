internal import Foundation

/// A position in the feed for keyset pagination: the page continues with posts strictly older than this one.
///
/// Its string form (``description``, parsed by ``init(_:)``) is opaque to users: `<createdAtMillis>.<sequence>`.
public struct FeedCursor: Sendable, Hashable, Codable, LosslessStringConvertible {
    /// Creation time of the last post of the previous page, in milliseconds since 1970.
    public let createdAtMillis: Int64
    /// Insertion sequence of that post (the tie-breaker).
    public let sequence: Int64

    /// Creates a cursor from its parts.
    public init(createdAtMillis: Int64, sequence: Int64) {
        self.createdAtMillis = createdAtMillis
        self.sequence = sequence
    }

    /// The cursor just after `post`.
    public init(after post: Post) {
        self.init(createdAtMillis: Int64((post.createdAt.timeIntervalSince1970 * 1000).rounded()), sequence: post.sequence)
    }

    /// Parses a cursor string; `nil` when it is malformed (not two non-negative decimal integers joined by `.`).
    public init?(_ description: String) {
        let parts = description.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2,
            parts.allSatisfy({ !$0.isEmpty && $0.count <= 19 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let millis = Int64(parts[0]), let sequence = Int64(parts[1])
        else { return nil }
        self.init(createdAtMillis: millis, sequence: sequence)
    }

    /// The opaque string form, `<createdAtMillis>.<sequence>`.
    public var description: String { "\(createdAtMillis).\(sequence)" }
}
