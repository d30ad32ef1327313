internal import FeedSync

extension CommandRunner {
    /// `demo`: the seed-004 flow on sample data, narrated on stdout, ending on the feed with ❤️ on post2.
    ///
    /// Re-runnable: when alice already likes post2 from an earlier run, the like is toggled off first so that the
    /// run still shows a like landing.
    func demo() throws(CLIError) -> ExitCode {
        let service = try context.openService(create: true)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let viewer = "alice"
        let postID = "post2"
        let status = try attempt { () throws(FeedError) in try service.status() }
        var narration: [String] = ["FeedSync demo — database \(TextSanitizer.clean(context.settings.databaseDisplay))", ""]
        if status.posts == 0 {
            try installSampleData(service)
            narration.append("Created the sample data: users alice, bob and carol; posts post1…post5.")
        } else {
            narration.append("Using the posts already in the database.")
        }
        let detailCheck: PostDetail
        do {
            detailCheck = try service.post(id: postID, viewerID: viewer)
        } catch {
            guard error.category == .data else { throw CLIError(error) }
            throw CLIError(
                "the database \(FeedError.quoted(context.settings.databaseDisplay)) has other posts than the demo's "
                    + "(no alice or post2). Pass --db with a new path.",
                exitCode: .data)
        }
        printLines(narration)

        let failure = withDependencies {
            $0.feedClient = .live(service)
        } operation: { () -> CLIError? in
            do throws(CLIError) {
                try play(viewer: viewer, postID: postID, alreadyLiked: detailCheck.liked)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
        return .success
    }

    /// Steps 1–4 of the demo; runs inside the `feedClient` override.
    private func play(viewer: String, postID: String, alreadyLiked: Bool) throws(CLIError) {
        let style = context.style
        let feed = FeedListProjection(viewerID: viewer, pageSize: 10)
        feed.send(.refresh)
        try check(feed(\.lastError))
        printLines(
            ["", style.bold("1. The feed, as alice (FeedListProjection):")]
                + TextShapes.feed(posts: feed(\.posts), liked: feed(\.likedPostIDs), style: style))

        let detail = PostDetailProjection(postID: postID, viewerID: viewer)
        detail.send(.load)
        try check(detail(\.lastError))
        printLines(["", style.bold("2. Open post2 (PostDetailProjection):")] + detailLines(detail))

        if alreadyLiked {
            detail.send(.unlike)
            try check(detail(\.lastError))
            printLines(["", "alice already liked post2 in an earlier run: unliking it first (\(detail(\.likeCount)) likes)."])
        }
        detail.send(.like)
        try check(detail(\.lastError))
        printLines(["", style.bold("3. Like it:")] + detailLines(detail))
        // The like event reaches the feed on its own bridge queue, moments after the command returned.
        @Dependency(\.feedClient) var client
        client.bridge.waitForDelivery(through: detail(\.lastAppliedSeq))

        let count = feed(\.posts).first { $0.id == postID }?.likeCount ?? 0
        printLines(
            ["", style.bold("4. Back to the feed:") + " the like event already reached the feed projection —"]
                + ["   ❤️ on post2 and \(count == 1 ? "1 like" : "\(count) likes"), with no reload."]
                + TextShapes.feed(posts: feed(\.posts), liked: feed(\.likedPostIDs), style: style)
                + ["", "Try it yourself: feedsync app --user alice   (or: feedsync --help)"])
    }

    private func detailLines(_ detail: PostDetailProjection) -> [String] {
        guard let post = detail(\.post) else { return [] }
        return TextShapes.detail(post, liked: detail(\.liked), style: context.style)
    }

    private func check(_ error: FeedError?) throws(CLIError) {
        if let error { throw CLIError(error) }
    }

    /// Creates the demo's users that are missing and its posts.
    func installSampleData(_ service: FeedService) throws(CLIError) {
        let sample = SampleData.demo
        let existing = Set(try attempt { () throws(FeedError) in try service.users() }.map(\.id))
        for user in sample.users where !existing.contains(user.id) {
            try attempt { () throws(FeedError) in _ = try service.createUser(id: user.id, name: user.name) }
        }
        for post in sample.posts {
            try attempt { () throws(FeedError) in _ = try service.createPost(id: post.id, authorID: post.authorID, body: post.body) }
        }
    }
}
