internal import FeedJSON
internal import FeedSync

extension CommandRunner {
    /// `user add ID [--name NAME]`.
    func userAdd(_ command: UserAddCommand) throws(CLIError) -> ExitCode {
        let service = try context.openService(create: false)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let user = try attempt { () throws(FeedError) in try service.createUser(id: command.id, name: command.name) }
        if json { printJSON(JSONShapes.user(user)) } else { console.line(TextSanitizer.clean(user.id)) }
        return .success
    }

    /// `user list`.
    func userList() throws(CLIError) -> ExitCode {
        let service = try context.openService(create: false)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let users = try attempt { () throws(FeedError) in try service.users() }
        if json {
            printJSON(.object([("users", .array(users.map(JSONShapes.user)))]))
        } else if users.isEmpty {
            console.error("No users yet. Add one with 'feedsync user add ID'.")
        } else {
            var table = TextTable(headers: ["USER", "NAME", "CREATED"], alignments: [.left, .left, .left])
            table.rows = users.map {
                [TextSanitizer.clean($0.id), TextSanitizer.shortened($0.name, width: 40), ISOTime.short($0.createdAt)]
            }
            printLines(table.lines(header: context.style.bold))
        }
        return .success
    }

    /// `post add [--author ID] [--id POSTID] TEXT`: prints the new id. On a replica the author is the replica's user.
    func postAdd(_ command: PostAddCommand) throws(CLIError) -> ExitCode {
        let missingAuthor = ParserError.missingOption(option: "author", command: "post add")
        if command.authorID == nil, !context.isReplica() { throw CLIError(missingAuthor) }
        let service = try context.openService(create: false)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let author = try context.replicaDefault(on: service, given: command.authorID, origin: "--author") { missingAuthor } ?? ""
        let post = try attempt { () throws(FeedError) in
            try service.createPost(id: command.postID, authorID: author, body: command.text)
        }
        if json { printJSON(JSONShapes.post(post, liked: false)) } else { console.line(TextSanitizer.clean(post.id)) }
        return .success
    }

    /// `feed [--limit N] [--before CURSOR]`.
    func feed(_ command: FeedCommand) throws(CLIError) -> ExitCode {
        let (service, viewer) = try context.openService(actingUser: false)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let page = try attempt { () throws(FeedError) in
            try service.feedPage(viewerID: viewer, before: command.before, limit: command.limit)
        }
        if json {
            printJSON(JSONShapes.page(page))
            return .success
        }
        if page.rows.isEmpty {
            console.error(
                command.before == nil
                    ? "No posts yet. Add one with 'feedsync post add --author ID TEXT', or run 'feedsync seed'."
                    : "No older posts.")
            return .success
        }
        var lines = TextShapes.feed(posts: page.rows.map(\.post), liked: page.likedPostIDs, style: context.style)
        if let next = page.nextCursor {
            lines.append("")
            lines.append("More: feedsync feed --before \(next.description)")
        }
        printLines(lines)
        return .success
    }

    /// `show POST`.
    func show(_ postID: String) throws(CLIError) -> ExitCode {
        let (service, viewer) = try context.openService(actingUser: false)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let detail = try attempt { () throws(FeedError) in try service.post(id: postID, viewerID: viewer) }
        if json {
            printJSON(JSONShapes.post(detail.post, liked: detail.liked))
        } else {
            printLines(TextShapes.detail(detail.post, liked: detail.liked, style: context.style))
        }
        return .success
    }

    /// `like POST`, `unlike POST`, `toggle POST`: exits 0 only after the commit.
    func like(_ command: LikeActionCommand) throws(CLIError) -> ExitCode {
        let (service, acting) = try context.openService(actingUser: true)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let user = acting ?? ""
        let result = try attempt { () throws(FeedError) in
            switch command.action {
            case .like: try service.like(userID: user, postID: command.postID)
            case .unlike: try service.unlike(userID: user, postID: command.postID)
            case .toggle: try service.toggle(userID: user, postID: command.postID)
            }
        }
        if json { printJSON(JSONShapes.likeResult(result)) } else { console.line(TextShapes.likeResult(result)) }
        return .success
    }
}
