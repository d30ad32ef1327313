internal import FeedCore
internal import Foundation

/// What makes a database a replica: where it syncs from, as whom, under which client id.
struct ReplicaIdentity: Sendable, Hashable {
    let source: String
    let userID: String
    let clientID: String
}

/// The replica's own tables (`replica_state`, `replica_mutations`, `replica_base`) inside one transaction.
///
/// The feed tables show the source's confirmed state with the pending mutations on top. For each post with a pending
/// like or unlike, `replica_base` keeps the state the source last confirmed; ``reconcile(_:confirmedLiked:confirmedCount:)``
/// recomputes what the tables show from it and the newest pending intent, and appends a local event when that
/// changed — the one place the shown state of a post is derived.
struct ReplicaTables {
    let tx: any FeedTransaction
    let identity: ReplicaIdentity
    let now: Date

    init(_ tx: any FeedTransaction, identity: ReplicaIdentity, now: Date) {
        self.tx = tx
        self.identity = identity
        self.now = now
    }

    /// The replica user's key; `nil` until the first pull brought the user.
    private var userKey: Int64? { get throws { try tx.userKey(for: identity.userID) } }

    // MARK: The identity and the cursor

    static func identity(in tx: any FeedTransaction) throws -> ReplicaIdentity? {
        guard let row = try tx.fetch("SELECT source, user_id, client_id FROM replica_state WHERE id = 1", []).first else { return nil }
        return ReplicaIdentity(source: row[0].text ?? "", userID: row[1].text ?? "", clientID: row[2].text ?? "")
    }

    struct Cursor {
        /// The source seq the state reflects; `nil` before the first pull.
        var syncedSeq: Int64?
        var bulkGeneration: Int64
        var pushedThrough: Int64
    }

    func cursor() throws -> Cursor {
        let row = try tx.fetch("SELECT synced_seq, bulk_generation, pushed_through, last_sync_at FROM replica_state WHERE id = 1", [])[0]
        return Cursor(
            syncedSeq: row[3] == .null ? nil : row[0].integer, bulkGeneration: row[1].integer ?? 0, pushedThrough: row[2].integer ?? 0)
    }

    func recordPull(through seq: Int64, bulkGeneration: Int64) throws {
        try tx.execute(
            "UPDATE replica_state SET synced_seq = $1, bulk_generation = $2, last_sync_at = $3, last_error = NULL WHERE id = 1",
            [.integer(seq), .integer(bulkGeneration), .integer(FeedService.millis(now))])
    }

    func recordPush(through number: Int64) throws {
        try tx.execute(
            "UPDATE replica_state SET pushed_through = max(pushed_through, $1) WHERE id = 1", [.integer(number)])
    }

    // MARK: The queue

    /// Queues a local write; returns its number.
    @discardableResult
    func enqueue(_ kind: SyncMutation.Kind, postID: String, body: String? = nil) throws -> Int64 {
        let stored =
            switch kind {
            case .like: "like"
            case .unlike: "unlike"
            case .createPost: "post"
            }
        let rows = try tx.fetch(
            "INSERT INTO replica_mutations (kind, post_id, body, at) VALUES ($1, $2, $3, $4) RETURNING number",
            [.text(stored), .text(postID), body.map { .text($0) } ?? .null, .integer(FeedService.millis(now))])
        return rows[0][0].integer ?? 0
    }

    /// Pending mutations after `number`, oldest first.
    func pending(after number: Int64, limit: Int) throws -> [SyncMutation] {
        try tx.fetch(
            "SELECT number, kind, post_id, body FROM replica_mutations WHERE rejected IS NULL AND number > $1 ORDER BY number LIMIT $2",
            [.integer(number), .integer(Int64(limit))]
        ).map { row in
            let kind: SyncMutation.Kind =
                switch row[1].text {
                case "like": .like
                case "unlike": .unlike
                default: .createPost
                }
            return SyncMutation(number: row[0].integer ?? 0, kind: kind, postID: row[2].text ?? "", body: row[3].text)
        }
    }

    /// Records the source's refusals; the shown state of each post falls back to what the source confirmed.
    func reject(_ rejections: [SyncRejection]) throws -> [EventRecord] {
        var events: [EventRecord] = []
        for rejection in rejections {
            let rows = try tx.fetch(
                "UPDATE replica_mutations SET rejected = $2 WHERE number = $1 AND rejected IS NULL RETURNING post_id",
                [.integer(rejection.number), .text(rejection.reason)])
            for row in rows { events += try reconcile(row[0].text ?? "") }
        }
        return events
    }

    /// Removes the mutations through `number` from the queue: their effect is in the state pulled.
    func confirm(through number: Int64) throws -> [EventRecord] {
        let posts = try tx.fetch(
            "DELETE FROM replica_mutations WHERE number <= $1 AND rejected IS NULL RETURNING post_id", [.integer(number)]
        ).compactMap { $0[0].text }
        var events: [EventRecord] = []
        for postID in Set(posts).sorted() { events += try reconcile(postID) }
        return events
    }

    struct Counts {
        var pending: Int
        var rejected: Int
    }

    func counts() throws -> Counts {
        let row = try tx.fetch(
            "SELECT count(*) FILTER (WHERE rejected IS NULL), count(*) FILTER (WHERE rejected IS NOT NULL) FROM replica_mutations", [])[0]
        return Counts(pending: Int(row[0].integer ?? 0), rejected: Int(row[1].integer ?? 0))
    }

    // MARK: What the tables show

    /// Before a local like or unlike of `postID`: keeps the confirmed state of the post, unless it is kept already.
    func keepBase(of postID: String) throws {
        try tx.execute(
            """
            INSERT INTO replica_base (post_id, liked, like_count)
            SELECT p.id, EXISTS (SELECT 1 FROM likes l WHERE l.post_key = p.post_key AND l.user_key = $2), p.like_count
            FROM posts p WHERE p.id = $1
            ON CONFLICT (post_id) DO NOTHING
            """,
            [.text(postID), .integer(try userKey ?? -1)])
    }

    /// Sets what the source confirmed for a post (`nil` keeps that part) and makes the tables show it with the
    /// newest pending intent on top; returns the local event of the change, if the shown state changed.
    func reconcile(_ postID: String, confirmedLiked: Bool? = nil, confirmedCount: Int? = nil) throws -> [EventRecord] {
        guard let userKey = try userKey,
            let row = try tx.fetch(
                """
                SELECT p.post_key, p.like_count, EXISTS (SELECT 1 FROM likes l WHERE l.post_key = p.post_key AND l.user_key = $2),
                       b.liked, b.like_count,
                       (SELECT m.kind FROM replica_mutations m
                        WHERE m.post_id = p.id AND m.rejected IS NULL AND m.kind <> 'post' ORDER BY m.number DESC LIMIT 1)
                FROM posts p LEFT JOIN replica_base b ON b.post_id = p.id
                WHERE p.id = $1
                """,
                [.text(postID), .integer(userKey)]
            ).first
        else { return [] }
        let postKey = row[0].integer ?? 0
        let shownCount = Int(row[1].integer ?? 0)
        let shownLiked = row[2].integer == 1
        let base = (liked: row[3] == .null ? shownLiked : row[3].integer == 1, count: row[4].integer.map(Int.init) ?? shownCount)
        let confirmed = (liked: confirmedLiked ?? base.liked, count: confirmedCount ?? base.count)
        let intent: Bool? = row[5].text.map { $0 == "like" }
        if intent == nil {
            try tx.execute("DELETE FROM replica_base WHERE post_id = $1", [.text(postID)])
        } else {
            try tx.execute(
                """
                INSERT INTO replica_base (post_id, liked, like_count) VALUES ($1, $2, $3)
                ON CONFLICT (post_id) DO UPDATE SET liked = excluded.liked, like_count = excluded.like_count
                """,
                [.text(postID), .integer(confirmed.liked ? 1 : 0), .integer(Int64(confirmed.count))])
        }
        let liked = intent ?? confirmed.liked
        let count = max(0, confirmed.count + (liked ? 1 : 0) - (confirmed.liked ? 1 : 0))
        if liked != shownLiked {
            if liked {
                try tx.execute(
                    "INSERT INTO likes (user_key, post_key, created_at) VALUES ($1, $2, $3)",
                    [.integer(userKey), .integer(postKey), .integer(FeedService.millis(now))])
            } else {
                try tx.execute("DELETE FROM likes WHERE user_key = $1 AND post_key = $2", [.integer(userKey), .integer(postKey)])
            }
        }
        if count != shownCount {
            try tx.execute("UPDATE posts SET like_count = $2 WHERE post_key = $1", [.integer(postKey), .integer(Int64(count))])
        }
        if liked != shownLiked {
            return [try tx.appendEvent(kind: liked ? .liked : .unliked, userID: identity.userID, postID: postID, likeCount: count, at: now)]
        }
        if count != shownCount {
            return [try tx.appendEvent(kind: .likeCountChanged, userID: "", postID: postID, likeCount: count, at: now)]
        }
        return []
    }

    /// Adds a user the source has, unless it is here.
    func addUser(id: String, name: String, createdAt: Int64) throws -> [EventRecord] {
        guard try tx.userKey(for: id) == nil else { return [] }
        let at = Date(timeIntervalSince1970: Double(createdAt) / 1000)
        _ = try tx.insertUser(id: id, name: name, at: at)
        return [try tx.appendEvent(kind: .userCreated, userID: id, postID: nil, likeCount: nil, at: at)]
    }

    /// Adds a post the source has, unless it is here. A post this replica created, now confirmed, takes the source's
    /// creation time (the source's clock orders the feed); among posts of the same millisecond it keeps its place.
    func addPost(id: String, authorID: String, body: String, createdAt: Int64) throws -> [EventRecord] {
        if try tx.post(id: id) != nil {
            try tx.execute("UPDATE posts SET created_at = $2 WHERE id = $1 AND created_at <> $2", [.text(id), .integer(createdAt)])
            return []
        }
        var events = try addUser(id: authorID, name: "", createdAt: createdAt)
        let at = Date(timeIntervalSince1970: Double(createdAt) / 1000)
        _ = try tx.insertPost(id: id, authorID: authorID, body: body, at: at)
        events.append(try tx.appendEvent(kind: .postCreated, userID: authorID, postID: id, likeCount: nil, at: at))
        return events
    }
}
