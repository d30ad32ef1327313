/// A decoded command, ready to validate against the environment and run.
enum Command: Sendable, Hashable {
    case initialize
    case status
    case userAdd(UserAddCommand)
    case userList
    case postAdd(PostAddCommand)
    case postDelete(postID: String)
    case userDelete(userID: String)
    case feed(FeedCommand)
    case show(postID: String)
    case like(LikeActionCommand)
    case events(EventsCommand)
    case watch(FeedCommand)
    case app(FeedCommand)
    case seed(SeedCommand)
    case check
    case demo
    case completions(CompletionShell)
    case replicaInit(ReplicaInitCommand)
    case sync(SyncCommand)
    case tokenIssue(TokenIssueCommand)
    case tokenList
    case tokenRevoke(TokenRevokeCommand)
    case serve(ServeCommand)
}
