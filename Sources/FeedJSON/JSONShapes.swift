package import FeedCore
package import FeedDomain

/// The JSON objects of the CLI's `--json` output and of `feedsync serve`'s answers, with keys in their documented
/// order (`Docs/CLI.md`).
package enum JSONShapes {
    /// `{"id","author","body","createdAt","likeCount","liked"}`.
    package static func post(_ post: Post, liked: Bool) -> JSONValue {
        .object([
            ("id", .string(post.id)), ("author", .string(post.authorID)), ("body", .string(post.body)),
            ("createdAt", .time(post.createdAt)), ("likeCount", .number(post.likeCount)), ("liked", .bool(liked)),
        ])
    }

    /// `{"viewer","posts":[…],"nextCursor"}`.
    package static func page(_ page: FeedPage) -> JSONValue {
        .object([
            ("viewer", .optional(page.viewerID)),
            ("posts", .array(page.rows.map { post($0.post, liked: $0.liked) })),
            ("nextCursor", .optional(page.nextCursor?.description)),
        ])
    }

    /// `{"postID","userID","liked","likeCount","changed","seq"}`.
    package static func likeResult(_ result: LikeResult) -> JSONValue {
        .object([
            ("postID", .string(result.postID)), ("userID", .string(result.userID)), ("liked", .bool(result.liked)),
            ("likeCount", .number(result.likeCount)), ("changed", .bool(result.changed)),
            ("seq", result.seq.map(JSONValue.int) ?? .null),
        ])
    }

    /// `{"postID","deleted","seq"}`.
    package static func postDeletion(_ deletion: PostDeletion) -> JSONValue {
        .object([
            ("postID", .string(deletion.postID)), ("deleted", .bool(deletion.deleted)),
            ("seq", deletion.seq.map(JSONValue.int) ?? .null),
        ])
    }

    /// `{"userID","deleted","deletedPosts","removedLikes","seq"}`.
    package static func userErasure(_ erasure: UserErasure) -> JSONValue {
        .object([
            ("userID", .string(erasure.userID)), ("deleted", .bool(erasure.deleted)),
            ("deletedPosts", .number(erasure.deletedPosts)), ("removedLikes", .number(erasure.removedLikes)),
            ("seq", erasure.seq.map(JSONValue.int) ?? .null),
        ])
    }

    /// `{"seq","kind","postID","userID","likeCount","at"}`.
    package static func event(_ event: EventRecord) -> JSONValue {
        .object([
            ("seq", .int(event.seq)), ("kind", .string(event.kind.rawValue)), ("postID", .optional(event.postID)),
            ("userID", .string(event.userID)), ("likeCount", event.likeCount.map(JSONValue.number) ?? .null),
            ("at", .time(event.at)),
        ])
    }

    /// `{"id","name","createdAt"}`.
    package static func user(_ user: User) -> JSONValue {
        .object([("id", .string(user.id)), ("name", .string(user.name)), ("createdAt", .time(user.createdAt))])
    }
}

extension JSONShapes {
    /// `{"id","user","token"}`: a token just issued, the only shape that holds a token's text.
    package static func issuedToken(_ issued: IssuedToken) -> JSONValue {
        .object([("id", .string(issued.id)), ("user", .string(issued.userID)), ("token", .string(issued.token))])
    }

    /// `{"id","user","label","createdAt","revokedAt"}`: a token as `token list` shows it, without its text or hash.
    package static func token(_ token: TokenInfo) -> JSONValue {
        .object([
            ("id", .string(token.id)), ("user", .string(token.userID)), ("label", .string(token.label)),
            ("createdAt", .time(token.createdAt)), ("revokedAt", token.revokedAt.map(JSONValue.time) ?? .null),
        ])
    }
}
