internal import FeedCore
internal import Foundation

/// Milliseconds since 1970 for a date, as stored in the schema (the same rounding as the SQLite backend).
func millis(_ date: Date) -> Int64 {
    Int64((date.timeIntervalSince1970 * 1000).rounded())
}

/// The date for milliseconds since 1970.
func date(millis: Int64) -> Date {
    Date(timeIntervalSince1970: Double(millis) / 1000)
}

/// One transaction (or, for ``Access/readOnce``, one connection in autocommit mode) on a PostgreSQL connection.
///
/// Expected refusals are found without a failing statement, so they do not abort the transaction (a failed
/// statement aborts a PostgreSQL transaction, unlike SQLite's): a duplicate id is an `INSERT … ON CONFLICT DO
/// NOTHING` that inserted nothing, a missing author an `INSERT … SELECT` that found no user. Any other failure
/// aborts the transaction; it is remembered in ``abortingFailure`` so that the backend rolls back (and retries a
/// deadlock) even when the body caught the error.
final class PostgresTransaction: FeedTransaction {
    /// What the transaction may do.
    enum Access {
        /// `BEGIN … READ WRITE`.
        case write
        /// `BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ`: one snapshot.
        case read
        /// No explicit transaction; each statement its own snapshot (and read-only by the session default).
        case readOnce
    }

    let connection: PostgresConnection
    let access: Access
    let location: String
    /// The first failure that aborted the transaction and was not undone by a savepoint rollback.
    private(set) var abortingFailure: PostgresFailure?
    private var savepointDepth = 0
    private var isValid = true
    /// The seq of the last event appended (even in a savepoint rolled back since: the backend only uses it to tell
    /// other processes that something may have committed, see ``PostgresNotifier``).
    private(set) var lastAppendedSeq: Int64?

    /// Whether ``applyLikeUnits(_:)`` is offered (``PostgresOptions/likeBatches``).
    private let likeBatches: Bool

    init(connection: PostgresConnection, access: Access, location: String, likeBatches: Bool = true) {
        self.connection = connection
        self.access = access
        self.location = location
        self.likeBatches = likeBatches
    }

    /// Ends the transaction's life: using it afterwards is a programming error.
    func invalidate() { isValid = false }

    // MARK: - Running statements

    /// Runs one of FeedSync's fixed statements (prepared once per connection).
    @discardableResult
    private func run(
        _ sql: String, _ parameters: [DatabaseValue] = [], prepared: Bool = true, binaryResults: Bool = false,
        claim: (PostgresFailure) -> StorageError? = { _ in nil }
    ) throws(StorageError) -> PostgresResult {
        precondition(isValid, "API Violation: a FeedTransaction used after its closure returned")
        do {
            return try connection.execute(sql, parameters, prepared: prepared, binaryResults: binaryResults)
        } catch {
            if access != .readOnce, !error.beforeSending, abortingFailure == nil { abortingFailure = error }
            throw claim(error) ?? error.storageError(location: location)
        }
    }

    private func requireWritable() throws(StorageError) {
        precondition(isValid, "API Violation: a FeedTransaction used after its closure returned")
        guard access == .write else { throw .readOnly(path: location) }
    }

    // MARK: - Users and posts

    func insertUser(id: String, name: String, at time: Date) throws -> User {
        try requireWritable()
        try Validation.checkID(id, field: "user id")
        try Validation.checkName(name)
        let stamp = millis(time)
        let result = try run(
            "INSERT INTO users (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING RETURNING user_key",
            [.text(id), .text(name), .integer(stamp)],
            claim: { $0.sqlState == "23505" ? .userAlreadyExists(id) : nil })
        guard result.rowCount == 1 else { throw StorageError.userAlreadyExists(id) }
        return User(id: id, name: name, createdAt: date(millis: stamp))
    }

    func insertPost(id: String, authorID: String, body: String, at time: Date) throws -> Post {
        try requireWritable()
        try Validation.checkID(id, field: "post id")
        try Validation.checkID(authorID, field: "author id")
        try Validation.checkBody(body)
        let stamp = millis(time)
        let result = try run(
            """
            INSERT INTO posts (id, author_id, body, created_at)
            SELECT $1::text, u.id, $3::text, $4::bigint FROM users u WHERE u.id = $2::text
            ON CONFLICT (id) DO NOTHING
            RETURNING post_key
            """,
            [.text(id), .text(authorID), .text(body), .integer(stamp)],
            claim: { failure in
                switch failure.sqlState {
                case "23505": .postAlreadyExists(id)
                case "23503": .userNotFound(authorID)
                default: nil
                }
            })
        guard let key = result.scalarInt64 else {
            // Nothing inserted: the id is taken (checked first, as SQLite's UNIQUE fails before its foreign key), or
            // the author is missing.
            if try run("SELECT EXISTS (SELECT 1 FROM posts WHERE id = $1)", [.text(id)]).bool(0, 0) == true {
                throw StorageError.postAlreadyExists(id)
            }
            throw StorageError.userNotFound(authorID)
        }
        return Post(id: id, authorID: authorID, body: body, createdAt: date(millis: stamp), likeCount: 0, sequence: key)
    }

    func userKey(for id: String) throws -> Int64? {
        try run("SELECT user_key FROM users WHERE id = $1", [.text(id)]).scalarInt64
    }

    func postKey(for id: String) throws -> Int64? {
        try run("SELECT post_key FROM posts WHERE id = $1", [.text(id)]).scalarInt64
    }

    func keys(userID: String, postID: String) throws -> (user: Int64, post: Int64) {
        let result = try run(
            "SELECT (SELECT user_key FROM users WHERE id = $1), (SELECT post_key FROM posts WHERE id = $2)",
            [.text(userID), .text(postID)])
        guard let user = result.int64(0, 0) else { throw StorageError.userNotFound(userID) }
        guard let post = result.int64(0, 1) else { throw StorageError.postNotFound(postID) }
        return (user, post)
    }

    func post(id: String) throws -> Post? {
        let result = try run(
            "SELECT id, author_id, body, created_at, like_count, post_key FROM posts WHERE id = $1", [.text(id)])
        return result.rowCount > 0 ? Self.decodePost(result, row: 0) : nil
    }

    func allUsers() throws -> [User] {
        let result = try run("SELECT id, name, created_at FROM users ORDER BY id")
        return (0..<result.rowCount).map { row in
            User(id: result.string(row, 0) ?? "", name: result.string(row, 1) ?? "", createdAt: date(millis: result.int64(row, 2) ?? 0))
        }
    }

    // The feed page statements. Each caps its rows twice: an inner `LIMIT` that is a constant of the statement's
    // text (the smallest of `pageSizeBuckets` that holds the page) and an outer `LIMIT $4`, the page size, bound.
    // With the bound limit alone PostgreSQL never keeps a generic plan for them: it costs a generic plan's unknown
    // `LIMIT` at 10 % of the table's matching rows, far above the custom plans for 50 rows, so every page was planned
    // again (~40 µs a page, measured with libpq alone: 200 µs against 160 µs with a constant limit). Under a
    // constant cap the generic plan costs no more than a custom one and is kept; the outer limit stops the index
    // scan at the page size, so the cap is never read past. The caps are this file's constants, never input.

    /// The inner caps; a page larger than the last, or unbounded (`limit < 0`), uses a statement without one.
    static let pageSizeBuckets = [50, 200, 1000]
    /// `pageSizeBuckets` as statement text (integer constants of this file, then none for the uncapped statement).
    private static let pageCapClauses = pageSizeBuckets.map { "\nLIMIT " + String($0) } + [""]

    /// The feed page query: the same order and cursor semantics as the SQLite backend's `PostRepository.feedPage`.
    ///
    /// The row comparison seeks into `posts_feed (created_at, post_key)`, scanned backwards. The like flag takes one
    /// of two forms, chosen per page by the viewer's stored number of likes (`users.like_count`, schema version 4)
    /// against the bound `$5` (``likeSetLimit(forPageLimit:)``):
    /// - up to it, the viewer's likes are read once into a hash table (a hashed subplan: one index range scan), and
    ///   each row is a hash lookup — the cheapest form for most viewers;
    /// - above it, each row is one primary-key probe, so that a viewer with 100,000 likes costs a page
    ///   O(limit · log n), not a read of all those likes.
    /// Both are in the one generic plan; the `CASE` runs only the chosen one. An unknown viewer (no `users` row, so
    /// a `NULL` count) takes the probe, which finds nothing.
    static let feedPageSQL: [String] = pageCapClauses.map { cap in
        """
        SELECT * FROM (
            SELECT p.id, p.author_id, p.body, p.created_at, p.like_count, p.post_key,
                   CASE WHEN (SELECT like_count FROM users WHERE user_key = $1) <= $5
                   THEN p.post_key IN (SELECT l.post_key FROM likes l WHERE l.user_key = $1)
                   ELSE (SELECT true FROM likes l WHERE l.user_key = $1 AND l.post_key = p.post_key) IS NOT NULL
                   END AS liked
            FROM posts p
            WHERE (p.created_at, p.post_key) < ($2, $3)
            ORDER BY p.created_at DESC, p.post_key DESC
        """ + cap + pageOuterLimit
    }

    /// The page for a viewer known by id, in one statement (one round trip): the viewer's key and like count are
    /// `InitPlan`s (each looked up once), used by the like flag as in ``feedPageSQL``; the key is returned in the
    /// first column of every row (`NULL`: no such user). A page with no rows says nothing about the viewer; the
    /// caller looks it up then (the end of the feed).
    static let feedPageByViewerIDSQL: [String] = pageCapClauses.map { cap in
        """
        SELECT * FROM (
            SELECT (SELECT user_key FROM users WHERE id = $1) AS viewer_key,
                   p.id, p.author_id, p.body, p.created_at, p.like_count, p.post_key,
                   CASE WHEN (SELECT like_count FROM users WHERE id = $1) <= $5
                   THEN p.post_key IN (
                       SELECT l.post_key FROM likes l WHERE l.user_key = (SELECT user_key FROM users WHERE id = $1))
                   ELSE (SELECT true FROM likes l
                         WHERE l.user_key = (SELECT user_key FROM users WHERE id = $1) AND l.post_key = p.post_key)
                        IS NOT NULL
                   END AS liked
            FROM posts p
            WHERE (p.created_at, p.post_key) < ($2, $3)
            ORDER BY p.created_at DESC, p.post_key DESC
        """ + cap + pageOuterLimit
    }

    /// The most likes a viewer may have for a page of `limit` rows to read them into a hash table rather than probe
    /// each row: five per row (250 for a page of 50), where the two forms cost the same. Measured with pgbench on
    /// W2's database, pages of 50 (ninth session, `Docs/Benchmarks.md`): the set ~17 % faster at ~100 likes, even
    /// at 250, 10–18 % slower at 500, a third slower at 1,000, a third the speed at 2,000. An unbounded page
    /// (`limit < 0`) counts as the largest capped one.
    static func likeSetLimit(forPageLimit limit: Int) -> Int64 {
        5 * Int64(limit >= 0 ? min(limit, Int(Int32.max)) : pageSizeBuckets[pageSizeBuckets.count - 1])
    }

    /// The end of both page statements: the page size, bound.
    private static let pageOuterLimit = "\n) p\nLIMIT $4"

    /// The statement of `statements` (one per bucket, then the uncapped one) for a page of `limit` rows.
    private static func statement(_ statements: [String], limit: Int) -> String {
        guard limit >= 0, let bucket = pageSizeBuckets.firstIndex(where: { limit <= $0 }) else { return statements[statements.count - 1] }
        return statements[bucket]
    }

    func feedPage(viewerKey: Int64?, before cursor: FeedCursor?, limit: Int) throws -> [FeedRow] {
        let after = cursor ?? FeedCursor(createdAtMillis: .max, sequence: .max)
        // SQLite reads a negative LIMIT as no limit; PostgreSQL reads NULL so.
        let limitValue: DatabaseValue = limit < 0 ? .null : .integer(Int64(limit))
        let result = try run(
            Self.statement(Self.feedPageSQL, limit: limit),
            [
                .integer(viewerKey ?? -1), .integer(after.createdAtMillis), .integer(after.sequence), limitValue,
                .integer(Self.likeSetLimit(forPageLimit: limit)),
            ],
            binaryResults: true)
        return (0..<result.rowCount).map { row in
            FeedRow(post: Self.decodePost(result, row: row), liked: result.bool(row, 6) ?? false)
        }
    }

    func feedPage(viewerID: String, before cursor: FeedCursor?, limit: Int) throws -> (viewerKey: Int64, rows: [FeedRow]) {
        let after = cursor ?? FeedCursor(createdAtMillis: .max, sequence: .max)
        let limitValue: DatabaseValue = limit < 0 ? .null : .integer(Int64(limit))
        let result = try run(
            Self.statement(Self.feedPageByViewerIDSQL, limit: limit),
            [
                .text(viewerID), .integer(after.createdAtMillis), .integer(after.sequence), limitValue,
                .integer(Self.likeSetLimit(forPageLimit: limit)),
            ],
            binaryResults: true)
        guard result.rowCount > 0 else {
            // Past the end of the feed (or an empty one): the page's statement returned no row to carry the key.
            guard let key = try userKey(for: viewerID) else { throw StorageError.userNotFound(viewerID) }
            return (key, [])
        }
        guard let key = result.int64(0, 0) else { throw StorageError.userNotFound(viewerID) }
        return (
            key,
            (0..<result.rowCount).map { row in
                FeedRow(post: Self.decodePost(result, row: row, from: 1), liked: result.bool(row, 7) ?? false)
            }
        )
    }

    static func decodePost(_ result: PostgresResult, row: Int, from column: Int = 0) -> Post {
        Post(
            id: result.string(row, column) ?? "", authorID: result.string(row, column + 1) ?? "",
            body: result.string(row, column + 2) ?? "", createdAt: date(millis: result.int64(row, column + 3) ?? 0),
            likeCount: Int(result.int64(row, column + 4) ?? 0), sequence: result.int64(row, column + 5) ?? 0)
    }

    // MARK: - Likes

    func insertLike(userKey: Int64, postKey: Int64, at time: Date) throws -> Bool {
        try requireWritable()
        return try run(
            "INSERT INTO likes (user_key, post_key, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            [.integer(userKey), .integer(postKey), .integer(millis(time))]
        ).changedRows > 0
    }

    func deleteLike(userKey: Int64, postKey: Int64) throws -> Bool {
        try requireWritable()
        return try run("DELETE FROM likes WHERE user_key = $1 AND post_key = $2", [.integer(userKey), .integer(postKey)]).changedRows > 0
    }

    func likeExists(userKey: Int64, postKey: Int64) throws -> Bool {
        try run(
            "SELECT EXISTS (SELECT 1 FROM likes WHERE user_key = $1 AND post_key = $2)", [.integer(userKey), .integer(postKey)]
        ).bool(0, 0) ?? false
    }

    func likedPostIDs(userKey: Int64) throws -> Set<String> {
        let result = try run(
            "SELECT p.id FROM likes l JOIN posts p ON p.post_key = l.post_key WHERE l.user_key = $1", [.integer(userKey)])
        return Set((0..<result.rowCount).compactMap { result.string($0, 0) })
    }

    func likeCount(postKey: Int64) throws -> Int? {
        try run("SELECT like_count FROM posts WHERE post_key = $1", [.integer(postKey)]).scalarInt64.map(Int.init)
    }

    func allLikes() throws -> Set<LikePair> {
        let result = try run(
            """
            SELECT u.id, p.id FROM likes l
            JOIN users u ON u.user_key = l.user_key JOIN posts p ON p.post_key = l.post_key
            """)
        var pairs = Set<LikePair>(minimumCapacity: result.rowCount)
        for row in 0..<result.rowCount {
            pairs.insert(LikePair(userID: result.string(row, 0) ?? "", postID: result.string(row, 1) ?? ""))
        }
        return pairs
    }

    // MARK: - The event log

    /// Appends an event: takes the next seq from `event_log_head` and inserts the event, in one statement.
    ///
    /// The `UPDATE` locks the head row until this transaction ends, which is the ordering cure: another
    /// transaction appending an event waits here until this one commits or rolls back, then reads the head this one
    /// left. So seqs are dense (a rollback gives the seq back with the rest) and commit in seq order: once a reader
    /// has seen seq P, every seq up to P has committed, and no seq at or before P can appear later.
    ///
    /// The cost: event-writing transactions are serialized from their append to their commit — which is why the
    /// append comes last, after the transaction's row work (done in parallel with other transactions'), and the
    /// head is the last lock such a transaction takes (so its holder waits for nothing but its commit).
    func appendEvent(kind: EventKind, userID: String, postID: String?, likeCount: Int?, at time: Date) throws -> EventRecord {
        try requireWritable()
        let stamp = millis(time)
        let result = try run(
            """
            WITH head AS (UPDATE event_log_head SET last_seq = last_seq + 1 WHERE id = 1 RETURNING last_seq)
            INSERT INTO events (seq, kind, user_id, post_id, like_count, at)
            SELECT last_seq, $1::text, $2::text, $3::text, $4::bigint, $5::bigint FROM head
            RETURNING seq
            """,
            [
                .text(kind.rawValue), .text(userID), postID.map(DatabaseValue.text) ?? .null,
                likeCount.map { .integer(Int64($0)) } ?? .null,
                .integer(stamp),
            ])
        guard let seq = result.scalarInt64 else { throw Self.missingHead }
        lastAppendedSeq = seq
        return EventRecord(seq: seq, kind: kind, userID: userID, postID: postID, likeCount: likeCount, at: date(millis: stamp))
    }

    /// Appends several events in one statement (one round trip, one head update): the drafts travel as bound
    /// arrays, unnested in order, and take the seqs after the head's, consecutively.
    func appendEvents(_ drafts: [EventDraft]) throws -> [EventRecord] {
        try requireWritable()
        if drafts.count <= 1 {
            return try drafts.map { draft in
                try appendEvent(kind: draft.kind, userID: draft.userID, postID: draft.postID, likeCount: draft.likeCount, at: draft.at)
            }
        }
        let stamps = drafts.map { millis($0.at) }
        let result = try run(
            """
            WITH head AS (
                UPDATE event_log_head SET last_seq = last_seq + $1::bigint WHERE id = 1 RETURNING last_seq - $1::bigint AS base
            )
            INSERT INTO events (seq, kind, user_id, post_id, like_count, at)
            SELECT head.base + d.n, d.kind, d.user_id, d.post_id, d.like_count, d.at
            FROM head, unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])
                WITH ORDINALITY AS d(kind, user_id, post_id, like_count, at, n)
            RETURNING seq
            """,
            [
                .integer(Int64(drafts.count)),
                .text(PostgresArray.text(drafts.map { $0.kind.rawValue })),
                .text(PostgresArray.text(drafts.map(\.userID))),
                .text(PostgresArray.text(drafts.map(\.postID))),
                .text(PostgresArray.integers(drafts.map { $0.likeCount.map(Int64.init) })),
                .text(PostgresArray.integers(stamps)),
            ])
        guard result.rowCount == drafts.count else { throw Self.missingHead }
        // RETURNING gives no order; the seqs are consecutive from the lowest, in the drafts' order.
        let first = (0..<result.rowCount).compactMap { result.int64($0, 0) }.min() ?? 0
        lastAppendedSeq = first + Int64(drafts.count) - 1
        return drafts.enumerated().map { index, draft in
            EventRecord(
                seq: first + Int64(index), kind: draft.kind, userID: draft.userID, postID: draft.postID,
                likeCount: draft.likeCount, at: date(millis: stamps[index]))
        }
    }

    private static let missingHead = StorageError.database(
        DatabaseFailure(backend: PostgresBackend.name, code: "P0002", message: "the event_log_head row is missing"))

    /// ``applyLikeUnits(_:)`` runs a batch in one statement, unless ``PostgresOptions/likeBatches`` is off.
    var appliesLikeUnits: Bool { likeBatches }

    /// The whole batch in one statement: `feedsync_apply_likes` (migrations 0003 and 0004) locks the batch's posts,
    /// then its users, in key order, applies each unit (in a subtransaction when there are several), appends the
    /// events last, and returns one row per operation. With one unit, its failure fails the statement — and so the transaction — and is
    /// thrown, as the unit's only outcome; with several, failures come back as results.
    func applyLikeUnits(_ units: [LikeUnit]) throws -> [Result<[LikeOutcome], StorageError>]? {
        try requireWritable()
        var unitNumbers: [Int64] = []
        var actions: [String] = []
        var userIDs: [String] = []
        var postIDs: [String] = []
        var stamps: [Int64] = []
        for (number, unit) in units.enumerated() {
            let stamp = millis(unit.at)
            for operation in unit.operations {
                unitNumbers.append(Int64(number))
                actions.append(operation.action.rawValue)
                userIDs.append(operation.userID)
                postIDs.append(operation.postID)
                stamps.append(stamp)
            }
        }
        guard !actions.isEmpty else { return units.map { _ in .success([]) } }
        let result = try run(
            """
            SELECT out_failed_code, out_failed_message, out_liked, out_like_count, out_seq
            FROM feedsync_apply_likes($1::integer[], $2::text[], $3::text[], $4::text[], $5::bigint[])
            """,
            [
                .text(PostgresArray.integers(unitNumbers)), .text(PostgresArray.text(actions)),
                .text(PostgresArray.text(userIDs)), .text(PostgresArray.text(postIDs)),
                .text(PostgresArray.integers(stamps)),
            ],
            claim: { failure in
                failure.sqlState == "FSU01" || failure.sqlState == "FSP01"
                    ? Self.unitFailure(code: failure.sqlState, message: failure.message, in: units) : nil
            })
        guard result.rowCount == actions.count else {
            throw StorageError.database(
                DatabaseFailure(
                    backend: PostgresBackend.name, code: "XX000",
                    message: "feedsync_apply_likes returned \(result.rowCount) rows for \(actions.count) operations"))
        }
        var outcomes: [Result<[LikeOutcome], StorageError>] = []
        outcomes.reserveCapacity(units.count)
        var row = 0
        for unit in units {
            if let code = result.string(row, 0) {
                outcomes.append(.failure(Self.unitFailure(code: code, message: result.string(row, 1) ?? "", in: [unit])))
                row += unit.operations.count
                continue
            }
            var list: [LikeOutcome] = []
            list.reserveCapacity(unit.operations.count)
            for operation in unit.operations {
                let liked = result.bool(row, 2) ?? false
                let count = Int(result.int64(row, 3) ?? 0)
                let event = result.int64(row, 4).map { seq in
                    EventRecord(
                        seq: seq, kind: liked ? .liked : .unliked, userID: operation.userID, postID: operation.postID,
                        likeCount: count, at: date(millis: millis(unit.at)))
                }
                if let event { lastAppendedSeq = max(lastAppendedSeq ?? 0, event.seq) }
                list.append(LikeOutcome(liked: liked, likeCount: count, event: event))
                row += 1
            }
            outcomes.append(.success(list))
        }
        return outcomes
    }

    /// The error for a unit that `feedsync_apply_likes` reported failed: `FSU01`/`FSP01` carry the unknown user's or
    /// post's id; anything else is a database failure.
    private static func unitFailure(code: String?, message: String, in units: [LikeUnit]) -> StorageError {
        switch code {
        case "FSU01":
            let id = units.lazy.flatMap(\.operations).first { $0.userID == message }?.userID
            return .userNotFound(id ?? message)
        case "FSP01":
            let id = units.lazy.flatMap(\.operations).first { $0.postID == message }?.postID
            return .postNotFound(id ?? message)
        default:
            return .database(DatabaseFailure(backend: PostgresBackend.name, code: code ?? "XX000", message: message))
        }
    }

    func appendLikeChange(_ kind: EventKind, userID: String, postID: String, postKey: Int64, at time: Date) throws -> EventRecord {
        precondition(kind == .liked || kind == .unliked, "API Violation: appendLikeChange with \(kind)")
        try requireWritable()
        guard let count = try likeCount(postKey: postKey) else { throw StorageError.postNotFound(postID) }
        return try appendEvent(kind: kind, userID: userID, postID: postID, likeCount: count, at: time)
    }

    func events(after seq: Int64, limit: Int?) throws -> [EventRecord] {
        let limitValue: DatabaseValue = limit.map { $0 < 0 ? .null : .integer(Int64($0)) } ?? .null
        let result = try run(
            "SELECT seq, kind, user_id, post_id, like_count, at FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
            [.integer(seq), limitValue])
        return (0..<result.rowCount).map { row in
            EventRecord(
                seq: result.int64(row, 0) ?? 0, kind: EventKind(rawValue: result.string(row, 1) ?? "") ?? .liked,
                userID: result.string(row, 2) ?? "", postID: result.string(row, 3), likeCount: result.int64(row, 4).map(Int.init),
                at: date(millis: result.int64(row, 5) ?? 0))
        }
    }

    func lastSeq() throws -> Int64 {
        try run("SELECT last_seq FROM event_log_head WHERE id = 1").scalarInt64 ?? 0
    }

    func lastSeq(before date: Date) throws -> Int64? {
        try run("SELECT max(seq) FROM events WHERE at < $1", [.integer(millis(date))]).scalarInt64
    }

    /// Deletes events with `seq <= seq`, keeping the newest event as the SQLite backend does (so both backends count
    /// the same rows after pruning; here the head would keep seqs from being reused anyway), and records the mark.
    func pruneEvents(through seq: Int64) throws -> Int {
        try requireWritable()
        let newest = try lastSeq()
        let limit = min(seq, newest - 1)
        guard limit > 0 else { return 0 }
        let deleted = try run("DELETE FROM events WHERE seq <= $1", [.integer(limit)]).changedRows
        try run("UPDATE log_state SET pruned_through = greatest(pruned_through, $1) WHERE id = 1", [.integer(limit)])
        return deleted
    }

    func replayBaseline() throws -> ReplayBaseline {
        let result = try run("SELECT pruned_through, bulk_generation, bulk_through FROM log_state WHERE id = 1")
        guard result.rowCount > 0 else { return ReplayBaseline(prunedThrough: 0, bulkGeneration: 0, bulkThrough: 0) }
        return ReplayBaseline(
            prunedThrough: result.int64(0, 0) ?? 0, bulkGeneration: result.int64(0, 1) ?? 0, bulkThrough: result.int64(0, 2) ?? 0)
    }

    // MARK: - Durable subscribers

    private static func validate(name: String, seq: Int64) throws(StorageError) {
        guard !name.isEmpty, name.unicodeScalars.count <= 128 else {
            throw .constraintViolation(field: "subscriber name", reason: "use 1 to 128 characters")
        }
        guard seq >= 0 else { throw .constraintViolation(field: "cursor", reason: "it is negative") }
    }

    func subscriberPosition(for name: String) throws -> SubscriberPosition? {
        if access == .write {
            // Two instances under one name may run passes at once on different connections: under READ COMMITTED
            // both would read the same cursor and apply the same events. A transaction-scoped advisory lock on the
            // name (the two-key space, apart from the migrator's one-key lock) makes their passes take turns until
            // COMMIT, as SQLite's single writer does; it works before the cursor row exists.
            _ = try run(
                "SELECT pg_advisory_xact_lock($1::integer, hashtext($2))",
                [.integer(Int64(Self.subscriberLockSpace)), .text(name)])
        }
        let result = try run("SELECT last_seq, bulk_generation FROM subscriber_cursors WHERE name = $1", [.text(name)])
        guard result.rowCount > 0 else { return nil }
        return SubscriberPosition(lastSeq: result.int64(0, 0) ?? 0, bulkGeneration: result.int64(0, 1) ?? 0)
    }

    /// The first key of the advisory locks that serialize a durable subscriber's passes (`FeSu` in ASCII).
    static let subscriberLockSpace: Int32 = 0x4665_5375

    func advanceSubscriberCursor(_ seq: Int64, for name: String, at time: Date) throws -> Int64 {
        try requireWritable()
        try Self.validate(name: name, seq: seq)
        let result = try run(
            """
            INSERT INTO subscriber_cursors (name, last_seq, updated_at) VALUES ($1, $2, $3)
            ON CONFLICT (name) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
            WHERE excluded.last_seq > subscriber_cursors.last_seq
            RETURNING last_seq
            """, [.text(name), .integer(seq), .integer(millis(time))])
        if let stored = result.scalarInt64 { return stored }
        return try run("SELECT last_seq FROM subscriber_cursors WHERE name = $1", [.text(name)]).scalarInt64 ?? seq
    }

    func markSubscriberRebuilt(_ name: String, through seq: Int64, bulkGeneration: Int64, at time: Date) throws {
        try requireWritable()
        try Self.validate(name: name, seq: seq)
        guard bulkGeneration >= 0 else {
            throw StorageError.constraintViolation(field: "bulk generation", reason: "it is negative")
        }
        try run(
            """
            INSERT INTO subscriber_cursors (name, last_seq, updated_at, bulk_generation) VALUES ($1, $2, $3, $4)
            ON CONFLICT (name) DO UPDATE
            SET last_seq = excluded.last_seq, updated_at = excluded.updated_at, bulk_generation = excluded.bulk_generation
            """, [.text(name), .integer(seq), .integer(millis(time)), .integer(bulkGeneration)])
    }

    func removeSubscriberCursor(for name: String) throws {
        try requireWritable()
        try run("DELETE FROM subscriber_cursors WHERE name = $1", [.text(name)])
    }

    func subscriberCursors() throws -> [String: Int64] {
        let result = try run("SELECT name, last_seq FROM subscriber_cursors")
        var cursors: [String: Int64] = [:]
        for row in 0..<result.rowCount {
            if let name = result.string(row, 0) { cursors[name] = result.int64(row, 1) ?? 0 }
        }
        return cursors
    }

    // MARK: - Whole-database

    func counts() throws -> FeedCounts {
        let result = try run(
            """
            SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM posts), (SELECT count(*) FROM likes),
                   (SELECT count(*) FROM events)
            """)
        return FeedCounts(
            users: Int(result.int64(0, 0) ?? 0), posts: Int(result.int64(0, 1) ?? 0), likes: Int(result.int64(0, 2) ?? 0),
            events: Int(result.int64(0, 3) ?? 0))
    }

    func invariantViolations() throws -> [InvariantViolation] {
        try PostgresInvariantChecker(run: { sql, parameters throws(StorageError) in try self.run(sql, parameters, prepared: false) })
            .violations()
    }

    func savepoint<T>(_ body: () throws -> T) throws -> T {
        precondition(isValid, "API Violation: a FeedTransaction used after its closure returned")
        // Outside a transaction every statement is its own; there is nothing to roll back to.
        guard access != .readOnce else { return try body() }
        savepointDepth += 1
        defer { savepointDepth -= 1 }
        // Identifiers cannot be bound; the name is built from an integer only.
        let name = "feedsync_savepoint_\(savepointDepth)"
        let failureBefore = abortingFailure
        try run("SAVEPOINT " + name, prepared: false)
        let value: T
        do {
            value = try body()
        } catch {
            rollBack(to: name, restoring: failureBefore)
            throw error
        }
        if let failure = abortingFailure, failureBefore == nil {
            // The body caught a failure that aborted the transaction: its changes cannot be kept without the
            // statement that failed, so the savepoint fails with that failure (the transaction goes on).
            rollBack(to: name, restoring: failureBefore)
            throw failure.storageError(location: location)
        }
        try run("RELEASE SAVEPOINT " + name, prepared: false)
        return value
    }

    private func rollBack(to name: String, restoring failure: PostgresFailure?) {
        do {
            try connection.execute("ROLLBACK TO SAVEPOINT " + name)
            try connection.execute("RELEASE SAVEPOINT " + name)
            abortingFailure = failure
        } catch {
            // The connection is gone or the transaction is beyond repair: keep the aborting failure, so the backend
            // rolls back the whole transaction.
            if abortingFailure == nil { abortingFailure = error }
        }
    }

    // MARK: - Your own tables

    func execute(_ sql: String, _ arguments: [DatabaseValue]) throws -> Int {
        guard arguments.isEmpty else { return try run(sql, arguments, prepared: false).changedRows }
        // No values to bind: the simple query protocol, which runs a script of several statements, as SQLite does.
        precondition(isValid, "API Violation: a FeedTransaction used after its closure returned")
        do {
            return try connection.executeScript(sql).changedRows
        } catch {
            if access != .readOnce, !error.beforeSending, abortingFailure == nil { abortingFailure = error }
            throw error.storageError(location: location)
        }
    }

    func fetch(_ sql: String, _ arguments: [DatabaseValue]) throws -> [[DatabaseValue]] {
        try run(sql, arguments, prepared: false).rows()
    }
}
