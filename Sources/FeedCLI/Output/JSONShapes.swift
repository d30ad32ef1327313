internal import FeedSync

/// The JSON objects of `--json` output, with keys in their documented order (`Docs/CLI.md`).
enum JSONShapes {
    /// `{"id","author","body","createdAt","likeCount","liked"}`.
    static func post(_ post: Post, liked: Bool) -> JSONValue {
        .object([
            ("id", .string(post.id)), ("author", .string(post.authorID)), ("body", .string(post.body)),
            ("createdAt", .time(post.createdAt)), ("likeCount", .number(post.likeCount)), ("liked", .bool(liked)),
        ])
    }

    /// `{"viewer","posts":[…],"nextCursor"}`.
    static func page(_ page: FeedPage) -> JSONValue {
        .object([
            ("viewer", .optional(page.viewerID)),
            ("posts", .array(page.rows.map { post($0.post, liked: $0.liked) })),
            ("nextCursor", .optional(page.nextCursor?.description)),
        ])
    }

    /// `{"postID","userID","liked","likeCount","changed","seq"}`.
    static func likeResult(_ result: LikeResult) -> JSONValue {
        .object([
            ("postID", .string(result.postID)), ("userID", .string(result.userID)), ("liked", .bool(result.liked)),
            ("likeCount", .number(result.likeCount)), ("changed", .bool(result.changed)),
            ("seq", result.seq.map(JSONValue.int) ?? .null),
        ])
    }

    /// `{"seq","kind","postID","userID","likeCount","at"}`.
    static func event(_ event: EventRecord) -> JSONValue {
        .object([
            ("seq", .int(event.seq)), ("kind", .string(event.kind.rawValue)), ("postID", .optional(event.postID)),
            ("userID", .string(event.userID)), ("likeCount", event.likeCount.map(JSONValue.number) ?? .null),
            ("at", .time(event.at)),
        ])
    }

    /// `{"id","name","createdAt"}`.
    static func user(_ user: User) -> JSONValue {
        .object([("id", .string(user.id)), ("name", .string(user.name)), ("createdAt", .time(user.createdAt))])
    }

    /// `{"path","backend","schemaVersion","binarySchemaVersion","pendingMigrations","users","posts","likes","events",
    /// "lastSeq"}`; `path` is the file, or the URL without its password.
    /// On a replica the keys of ``replicaStatus(_:)`` follow.
    static func status(_ status: StatusReport, replica: ReplicaStatus? = nil) -> JSONValue {
        let count: (Int?) -> JSONValue = { $0.map(JSONValue.number) ?? .null }
        return .object(
            [
                ("path", .string(status.path)), ("backend", .string(status.backend)),
                ("schemaVersion", .number(status.schemaVersion)),
                ("binarySchemaVersion", .number(status.binarySchemaVersion)),
                ("pendingMigrations", .number(status.pendingMigrations.count)), ("users", count(status.counts?.users)),
                ("posts", count(status.counts?.posts)), ("likes", count(status.counts?.likes)),
                ("events", count(status.counts?.events)), ("lastSeq", status.counts.map { JSONValue.int($0.lastSeq) } ?? .null),
            ] + (replica.map(replicaStatus) ?? []))
    }

    /// `{"pushed","pulled","rejected","pendingChanges","lastSyncedSeq"}`.
    static func syncReport(_ report: ReplicaSync.Report) -> JSONValue {
        .object([
            ("pushed", .number(report.pushed)), ("pulled", .number(report.pulled)), ("rejected", .number(report.rejected)),
            ("pendingChanges", .number(report.pendingChanges)), ("lastSyncedSeq", .int(report.lastSyncedSeq)),
        ])
    }

    /// `{"path","replicaOf","user","clientID","posts","lastSyncedSeq"}`: what `replica init` made; `replicaOf` is the
    /// source without its password.
    static func replicaInit(path: String, status: ReplicaStatus, posts: Int) -> JSONValue {
        .object([
            ("path", .string(path)), ("replicaOf", .string(status.replicaOf)), ("user", .string(status.user)),
            ("clientID", .string(status.clientID)), ("posts", .number(posts)), ("lastSyncedSeq", .int(status.lastSyncedSeq)),
        ])
    }

    /// The keys `status` adds on a replica: `"replicaOf","user","pendingChanges","rejectedChanges","lastSyncedSeq",
    /// "lastSyncAt","lastError"`.
    static func replicaStatus(_ status: ReplicaStatus) -> [(String, JSONValue)] {
        [
            ("replicaOf", .string(status.replicaOf)), ("user", .string(status.user)),
            ("pendingChanges", .number(status.pendingChanges)), ("rejectedChanges", .number(status.rejectedChanges)),
            ("lastSyncedSeq", .int(status.lastSyncedSeq)), ("lastSyncAt", status.lastSyncAt.map(JSONValue.time) ?? .null),
            ("lastError", .optional(status.lastError)),
        ]
    }
}
