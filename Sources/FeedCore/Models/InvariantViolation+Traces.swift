/// The `no-trace` rule of `check`: nothing names a user who does not exist (an erased one) or a deleted post.
///
/// Each backend's maintenance feature finds the rows with its own statements, one per ``TraceViolation/Kind``, and
/// reports each subject (a user id, a client id or a post id) with how many rows name it.
package enum TraceViolation {
    /// Where a trace was found.
    package enum Kind: CaseIterable, Sendable {
        /// Events whose non-empty `user_id` names no user.
        case eventUser
        /// API tokens of a user who does not exist.
        case tokenUser
        /// Replica sync client records of a user who does not exist.
        case syncClientUser
        /// Rejected replica mutations of a client whose record or user does not exist.
        case syncRejectionUser
        /// Like rows on a post that has a tombstone in `deleted_posts`.
        case deletedPostLike
        /// Post rows whose id has a tombstone in `deleted_posts`.
        case deletedPostRow
    }

    /// The rule's name, as ``InvariantViolation/rule``.
    package static let rule = "no-trace"

    /// At most this many subjects are reported per kind.
    package static let limit = 20

    /// The violation for `count` rows of `kind` naming `subject`.
    package static func violation(_ kind: Kind, subject: String, count: Int64) -> InvariantViolation {
        let detail =
            switch kind {
            case .eventUser: "\(count) \(count == 1 ? "event names" : "events name") user \"\(subject)\", who does not exist"
            case .tokenUser: "\(count) API \(count == 1 ? "token belongs" : "tokens belong") to user \"\(subject)\", who does not exist"
            case .syncClientUser:
                "\(count) sync client \(count == 1 ? "record belongs" : "records belong") to user \"\(subject)\", who does not exist"
            case .syncRejectionUser:
                "\(count) sync \(count == 1 ? "rejection" : "rejections") of client \"\(subject)\", whose record or user does not exist"
            case .deletedPostLike: "\(count) \(count == 1 ? "like names" : "likes name") post \"\(subject)\", which was deleted"
            case .deletedPostRow: "post \"\(subject)\" has a row but was deleted (it has a tombstone)"
            }
        return InvariantViolation(rule: rule, detail: detail)
    }
}
