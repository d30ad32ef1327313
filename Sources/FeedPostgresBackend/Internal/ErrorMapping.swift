internal import FeedCore

extension PostgresFailure {
    /// The ``StorageError`` for this failure when the call site claims no code of its own.
    ///
    /// - a lost connection (no SQLSTATE, class 08, the session terminated) → `connectionLost`;
    /// - `40001` serialization failure, `40P01` deadlock → `busy` (``PostgresBackend/write(_:afterCommit:)``
    ///   retries them first);
    /// - `57014` statement timeout or cancel → `timedOut`;
    /// - `42501` insufficient privilege → `readOnly`;
    /// - `25006` a write in a read-only transaction (a standby in recovery, or `default_transaction_read_only`)
    ///   → `notPrimary`;
    /// - `23514` check violation, `22001` value too long → `constraintViolation`;
    /// - anything else → `database` with the SQLSTATE, the primary message and the statement.
    func storageError(location: String) -> StorageError {
        if connectionBroken { return .connectionLost(location: location, reason: message) }
        switch sqlState {
        case "40001", "40P01": return .busy(databaseFailure)
        case "57014": return .timedOut(databaseFailure)
        case "42501": return .readOnly(path: location)
        case "25006": return .notPrimary(location: location)
        case "23514", "22001": return .constraintViolation(field: field, reason: message)
        default: return .database(databaseFailure)
        }
    }

    /// What a check constraint protects, for ``StorageError/constraintViolation(field:reason:)``: `user name` for
    /// the domain check `feedsync_user_name_check`, `posts.body` for a table's `posts_body_check`, else the
    /// constraint's or table's name.
    private var field: String {
        guard let constraint, constraint.hasSuffix("_check") else { return constraint ?? table ?? "value" }
        let name = constraint.dropLast("_check".count)
        if let table {
            if name.hasPrefix(table + "_"), name.count > table.count + 1 { return table + "." + name.dropFirst(table.count + 1) }
        } else if name.hasPrefix("feedsync_"), name.count > "feedsync_".count {
            return name.dropFirst("feedsync_".count).split(separator: "_").joined(separator: " ")
        }
        return constraint
    }
}
