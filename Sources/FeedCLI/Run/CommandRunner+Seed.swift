internal import FeedJSON
internal import FeedSync
internal import Foundation

extension CommandRunner {
    /// `seed`: the benchmark data set's shape (``SeedPlan``: the peers' W2 generator) through the bulk path in one
    /// transaction; refuses a database that has posts. Memory grows with users and posts, not with likes: the
    /// database deduplicates the randomly drawn likes.
    func seed(_ command: SeedCommand) throws(CLIError) -> ExitCode {
        let service = try context.openService(create: true)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let existing = try attempt { () throws(FeedError) in try service.status() }
        guard existing.posts == 0 else {
            throw CLIError(
                "the database \(FeedError.quoted(context.settings.databaseDisplay)) already has \(existing.posts) posts; "
                    + "seed fills only an empty one. Pass --db with a new path.",
                exitCode: .data)
        }
        let started = ContinuousClock.now
        var progress = ProgressBar(enabled: context.settings.stderrIsTerminal, console: console)
        let plan = SeedPlan(posts: command.posts, users: command.users, likes: command.likes)
        let summary: SeedSummary
        do {
            summary = try service.seed(plan) { step in progress.update(step.phase, done: step.done, total: step.total) }
        } catch {
            progress.finish()
            throw CLIError(error)
        }
        progress.finish()
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        if json {
            printJSON(
                .object([
                    ("users", .number(summary.users)), ("posts", .number(summary.posts)), ("likes", .number(summary.likes)),
                ]))
        } else {
            console.line(
                "Seeded \(summary.users) users, \(summary.posts) posts and \(summary.likes) likes in "
                    + String(format: "%.1f", seconds) + " s.")
        }
        return .success
    }
}
