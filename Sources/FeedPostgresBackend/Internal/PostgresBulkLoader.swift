internal import FeedCore
internal import Foundation

/// The bulk path on PostgreSQL: rows streamed with `COPY … FROM STDIN` in chunks of about 64 KiB, inside the bulk
/// load's one transaction.
///
/// At the start it locks `users`, `posts` and `likes` (`EXCLUSIVE`: reads go on, writes wait), disables the
/// like-count insert trigger (transactionally, as SQLite's loader drops it) and reads the highest keys; it then
/// assigns keys itself, so ``addUser(id:name:createdAt:)`` and ``addPost(id:authorID:body:createdAt:)`` answer
/// without a round trip. Each table has its own buffer; a buffer is copied when it fills (users before posts before
/// likes, so foreign keys always find their rows) and at ``finish()``.
///
/// Duplicate ids and missing authors are found per chunk before it is copied — duplicates within the chunk in
/// memory, against the table with one `= ANY($1)` query — so the error names the id, as the SQLite loader's does.
///
/// ``addLikeIfAbsent(userKey:postKey:createdAtMillis:)`` must answer at once: pairs added by this load are kept in
/// a set (memory bounded by the load's likes, 16 bytes a pair plus the set's overhead), and only a pair of a user
/// and a post that both existed before the load, in a database that had likes, is looked up in the table (one
/// query for that like). Seeding an empty database therefore makes no query per like.
///
/// ``finish()`` copies what is left, moves the identity sequences past the keys used, recounts the like counts of
/// the posts and the users that have likes, records the load in the replay baseline (as the SQLite loader's
/// `EventLog.recordBulkLoad()`), and re-enables the trigger.
final class PostgresBulkLoader: FeedBulkLoader {
    private let connection: PostgresConnection
    private let location: String
    private var nextUserKey: Int64
    private var nextPostKey: Int64
    /// The highest keys before the load: a pair above either cannot be in the table already.
    private let usersBefore: Int64
    private let postsBefore: Int64
    private let hadLikes: Bool

    private struct Pair: Hashable {
        let user: Int64
        let post: Int64
    }
    private var pairs = Set<Pair>()
    private var likesInserted = 0
    /// The tables this load added rows to (fixed names), to analyze at the end.
    private var loaded: Set<String> = []

    private var userRows = CopyBuffer()
    private var userIDs: [String] = []
    private var postRows = CopyBuffer()
    private var postIDs: [String] = []
    private var postAuthors: [String] = []
    private var likeRows = CopyBuffer()

    /// The size at which a buffer is copied.
    static let chunkBytes = 64 * 1024

    /// Starts a load on `connection`, which is inside the load's write transaction.
    init(connection: PostgresConnection, location: String) throws(StorageError) {
        self.connection = connection
        self.location = location
        do {
            // The tables first, then the log head, in the order every event-writing transaction takes its locks
            // (rows, then the head: see `FeedTransaction.appendEvent`). Taking the head first would deadlock with
            // a writer that holds a row of these tables and waits for the head. Once the tables are ours, no writer
            // is between its row work and its append on them; the head then waits only for a commit in progress.
            try connection.execute("LOCK TABLE users, posts, likes IN EXCLUSIVE MODE")
            try connection.execute("SELECT last_seq FROM event_log_head WHERE id = 1 FOR UPDATE")
            try connection.execute("ALTER TABLE likes DISABLE TRIGGER likes_count_insert")
            let keys = try connection.execute(
                """
                SELECT (SELECT coalesce(max(user_key), 0) FROM users),
                       coalesce(pg_sequence_last_value(pg_get_serial_sequence('users', 'user_key')::regclass), 0),
                       (SELECT coalesce(max(post_key), 0) FROM posts),
                       coalesce(pg_sequence_last_value(pg_get_serial_sequence('posts', 'post_key')::regclass), 0),
                       EXISTS (SELECT 1 FROM likes)
                """)
            usersBefore = keys.int64(0, 0) ?? 0
            postsBefore = keys.int64(0, 2) ?? 0
            nextUserKey = max(usersBefore, keys.int64(0, 1) ?? 0) + 1
            nextPostKey = max(postsBefore, keys.int64(0, 3) ?? 0) + 1
            hadLikes = keys.bool(0, 4) ?? true
        } catch {
            throw error.storageError(location: location)
        }
    }

    func addUser(id: String, name: String, createdAt: Date) throws -> Int64 {
        try Validation.checkID(id, field: "user id")
        try Validation.checkName(name)
        let key = nextUserKey
        nextUserKey += 1
        loaded.insert("users")
        userRows.row(.integer(key), .text(id), .text(name), .integer(millis(createdAt)))
        userIDs.append(id)
        if userRows.count >= Self.chunkBytes { try flushUsers() }
        return key
    }

    func addPost(id: String, authorID: String, body: String, createdAt: Date) throws -> Int64 {
        try Validation.checkID(id, field: "post id")
        try Validation.checkBody(body)
        let key = nextPostKey
        nextPostKey += 1
        loaded.insert("posts")
        postRows.row(.integer(key), .text(id), .text(authorID), .text(body), .integer(millis(createdAt)))
        postIDs.append(id)
        postAuthors.append(authorID)
        if postRows.count >= Self.chunkBytes { try flushPosts() }
        return key
    }

    func addLikeIfAbsent(userKey: Int64, postKey: Int64, createdAtMillis: Int64) throws -> Bool {
        let pair = Pair(user: userKey, post: postKey)
        if pairs.contains(pair) { return false }
        if hadLikes, userKey <= usersBefore, postKey <= postsBefore {
            let exists = try query(
                "SELECT EXISTS (SELECT 1 FROM likes WHERE user_key = $1 AND post_key = $2)", [.integer(userKey), .integer(postKey)]
            ).bool(0, 0)
            if exists != false {
                pairs.insert(pair)
                return false
            }
        }
        pairs.insert(pair)
        likeRows.row(.integer(userKey), .integer(postKey), .integer(createdAtMillis))
        likesInserted += 1
        if likeRows.count >= Self.chunkBytes { try flushLikes() }
        return true
    }

    /// The tables this load filled, in lock order.
    private var loadedTables: [String] { ["users", "posts", "likes"].filter(loaded.contains) }

    /// Copies the rest, restores the sequences, the like counts and the trigger, and records the load.
    func finish() throws(StorageError) {
        try flushLikes()
        do {
            if nextUserKey > usersBefore + 1 {
                try connection.execute(
                    "SELECT setval(pg_get_serial_sequence('users', 'user_key'), $1)", [.integer(nextUserKey - 1)], prepared: true)
            }
            if nextPostKey > postsBefore + 1 {
                try connection.execute(
                    "SELECT setval(pg_get_serial_sequence('posts', 'post_key'), $1)", [.integer(nextPostKey - 1)], prepared: true)
            }
            if likesInserted > 0 {
                try connection.execute(
                    """
                    UPDATE posts p SET like_count = c.n
                    FROM (SELECT post_key, count(*) AS n FROM likes GROUP BY post_key) c
                    WHERE p.post_key = c.post_key AND p.like_count <> c.n
                    """)
                try connection.execute(
                    """
                    UPDATE users u SET like_count = c.n
                    FROM (SELECT user_key, count(*) AS n FROM likes GROUP BY user_key) c
                    WHERE u.user_key = c.user_key AND u.like_count <> c.n
                    """)
                // The head row, locked since the load began, makes `bulk_through` exactly the last seq committed
                // before this load: an event-writing transaction in flight committed first, later ones wait.
                let head = try connection.execute("SELECT last_seq FROM event_log_head WHERE id = 1 FOR UPDATE").scalarInt64 ?? 0
                try connection.execute(
                    """
                    UPDATE log_state SET bulk_loaded = 1, bulk_generation = bulk_generation + 1, bulk_through = $1
                    WHERE id = 1
                    """, [.integer(head)])
            }
            try connection.execute("ALTER TABLE likes ENABLE TRIGGER likes_count_insert")
            // Fresh planner statistics for the tables this load filled: without them the first minutes of
            // queries after a large load (until autovacuum's analyze) get plans made for empty tables — a bitmap
            // heap scan for every primary-key probe of the feed page's like flag. Only those tables: analyzing a
            // table still empty (the likes of a load of users and posts) records "empty", and the like writers'
            // cached plans then scan the whole growing table (W1 at 16 clients: ~4,600/s with that analyze against
            // ~7,600/s without).
            if likesInserted > 0 { loaded.insert("likes") }
            if !loaded.isEmpty {
                // The names are FeedSync's own tables, never input.
                try connection.execute("ANALYZE " + loadedTables.joined(separator: ", "))
            }
        } catch {
            throw error.storageError(location: location)
        }
    }

    /// Runs after the load's `COMMIT`, on the same connection: `VACUUM` of the tables it filled, which sets the new
    /// rows' hint bits and the visibility map now rather than leaving that to the first readers (each would write
    /// hint bits to every page it touches, and the like flag's index-only probes would visit the heap) or to
    /// autovacuum a minute later. W2's first 2,000 pages right after its seed: see Docs/Storage.md. Best effort: the
    /// load is committed by then, so a failure here (a statement timeout on a huge table) is not the load's and is
    /// not reported; autovacuum does the same work later.
    func vacuumAfterCommit() {
        guard !loadedTables.isEmpty else { return }
        // The names are FeedSync's own tables, never input. VACUUM cannot run inside a transaction block.
        _ = try? connection.execute("VACUUM " + loadedTables.joined(separator: ", "))
    }

    // MARK: - Copying

    private func query(_ sql: String, _ parameters: [DatabaseValue]) throws(StorageError) -> PostgresResult {
        do {
            return try connection.execute(sql, parameters, prepared: true)
        } catch {
            throw error.storageError(location: location)
        }
    }

    private func copy(_ sql: String, _ buffer: inout CopyBuffer) throws(StorageError) {
        guard buffer.count > 0 else { return }
        do {
            try connection.copyIn(sql, data: buffer.bytes)
        } catch {
            throw error.storageError(location: location)
        }
        buffer.removeAll()
    }

    private func flushUsers() throws(StorageError) {
        guard !userIDs.isEmpty else { return }
        if let duplicate = Self.firstDuplicate(userIDs) { throw .userAlreadyExists(duplicate) }
        if let taken = try query("SELECT id FROM users WHERE id = ANY($1::text[]) LIMIT 1", [.text(Self.arrayLiteral(userIDs))]).string(
            0, 0)
        {
            throw .userAlreadyExists(taken)
        }
        try copy("COPY users (user_key, id, name, created_at) FROM STDIN", &userRows)
        userIDs.removeAll(keepingCapacity: true)
    }

    private func flushPosts() throws(StorageError) {
        try flushUsers()
        guard !postIDs.isEmpty else { return }
        if let duplicate = Self.firstDuplicate(postIDs) { throw .postAlreadyExists(duplicate) }
        if let taken = try query("SELECT id FROM posts WHERE id = ANY($1::text[]) LIMIT 1", [.text(Self.arrayLiteral(postIDs))]).string(
            0, 0)
        {
            throw .postAlreadyExists(taken)
        }
        let missing = try query(
            "SELECT a FROM unnest($1::text[]) WITH ORDINALITY AS t (a, n) WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.id = a) ORDER BY n LIMIT 1",
            [.text(Self.arrayLiteral(postAuthors))])
        if let author = missing.string(0, 0) { throw .userNotFound(author) }
        try copy("COPY posts (post_key, id, author_id, body, created_at) FROM STDIN", &postRows)
        postIDs.removeAll(keepingCapacity: true)
        postAuthors.removeAll(keepingCapacity: true)
    }

    private func flushLikes() throws(StorageError) {
        try flushPosts()
        try copy("COPY likes (user_key, post_key, created_at) FROM STDIN", &likeRows)
    }

    private static func firstDuplicate(_ ids: [String]) -> String? {
        var seen = Set<String>(minimumCapacity: ids.count)
        for id in ids where !seen.insert(id).inserted { return id }
        return nil
    }

    /// A `text[]` literal of `strings`, each element quoted (so that `NULL` stays a string) with `"` and `\` escaped.
    static func arrayLiteral(_ strings: [String]) -> String {
        var literal = "{"
        for (index, string) in strings.enumerated() {
            if index > 0 { literal += "," }
            literal += "\""
            for character in string.unicodeScalars {
                if character == "\"" || character == "\\" { literal += "\\" }
                literal.unicodeScalars.append(character)
            }
            literal += "\""
        }
        return literal + "}"
    }
}

@available(*, unavailable, message: "A bulk loader lives inside its transaction.")
extension PostgresBulkLoader: Sendable {}

/// Rows in COPY's text format: fields separated by tabs, rows ended by newlines, and backslash, tab, newline and
/// carriage return escaped.
struct CopyBuffer {
    /// One field of a row.
    enum Field {
        case integer(Int64)
        case text(String)
    }

    private(set) var bytes: [UInt8] = []

    /// The buffered size in bytes.
    var count: Int { bytes.count }

    /// Appends one row.
    mutating func row(_ fields: Field...) {
        for (index, field) in fields.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: "\t")) }
            switch field {
            case .integer(let value): bytes += String(value).utf8
            case .text(let value): appendEscaped(value)
            }
        }
        bytes.append(UInt8(ascii: "\n"))
    }

    private mutating func appendEscaped(_ text: String) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case UInt8(ascii: "\t"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case UInt8(ascii: "\n"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case UInt8(ascii: "\r"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            default: bytes.append(byte)
            }
        }
    }

    /// Empties the buffer, keeping its storage.
    mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }
}
