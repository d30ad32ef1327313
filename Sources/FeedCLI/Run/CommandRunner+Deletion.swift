internal import FeedJSON
internal import FeedSync

extension CommandRunner {
    /// `post delete POST`: the operator deletes any post; a deleted one again changes nothing.
    func postDelete(_ postID: String) throws(CLIError) -> ExitCode {
        let service = try context.openService(create: false)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let deletion = try attempt { () throws(FeedError) in try service.deletePost(postID: postID, by: nil) }
        if json {
            printJSON(JSONShapes.postDeletion(deletion))
        } else {
            let name = TextSanitizer.clean(postID)
            console.line(deletion.deleted ? "Deleted post \(name) (seq \(deletion.seq ?? 0))." : "Post \(name) was deleted already.")
        }
        return .success
    }

    /// `user delete ID`: erases the user; an unknown one changes nothing.
    func userDelete(_ userID: String) throws(CLIError) -> ExitCode {
        let service = try context.openService(create: false)
        defer { service.close() }
        let erasure = try attempt { () throws(FeedError) in try service.deleteUser(userID: userID) }
        if json {
            printJSON(JSONShapes.userErasure(erasure))
        } else if erasure.deleted {
            console.line(
                "Erased user \(TextSanitizer.clean(userID)): \(erasure.deletedPosts) posts and \(erasure.removedLikes) likes "
                    + "deleted (seq \(erasure.seq ?? 0)).")
        } else {
            console.line("No user \(TextSanitizer.clean(userID)): nothing to erase.")
        }
        return .success
    }
}
