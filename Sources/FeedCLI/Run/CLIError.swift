internal import FeedSync

/// A failure ready to print: one line on stderr and an exit status.
struct CLIError: Error, Sendable, Hashable {
    /// The whole line, starting with `Error: `.
    let message: String
    /// The exit status.
    let exitCode: ExitCode

    /// A failure with a message (without the `Error: ` prefix) and a status.
    init(_ problem: String, exitCode: ExitCode) {
        // Always one line: a message never spans lines, whatever it quotes.
        message = "Error: " + problem.split(whereSeparator: \.isNewline).joined(separator: " ")
        self.exitCode = exitCode
    }

    /// A command-line error (64).
    init(_ error: ParserError) {
        message = error.message
        exitCode = .usage
    }

    /// A domain error, with a hint at the fix; the status follows the error's category.
    init(_ error: FeedError) {
        let status: ExitCode =
            switch error.category {
            case .data: .data
            case .database: .database
            case .busy, .cancelled: .busy
            case .historyPruned: .historyPruned
            case .handler: .software
            case .forbidden: .forbidden
            }
        self.init(Self.describe(error), exitCode: status)
    }

    /// A sync failure: 75 when the source is unreachable for now (the replica keeps its queue), 64 when the
    /// database is not a replica, else 65 for what the source refused or the protocol, or the domain error's status.
    init(_ error: SyncError) {
        switch error {
        case .unavailable:
            self.init("\(error). Nothing was lost: the replica keeps its changes queued; try again later.", exitCode: .busy)
        case .notAReplica:
            self.init("\(error).", exitCode: .usage)
        case .accountNotFound:
            self.init("\(error).", exitCode: .data)
        case .unsupportedVersion, .invalidRequest, .clientOfAnotherUser, .unauthorized:
            self.init("\(error).", exitCode: .data)
        case .feed(let feedError):
            self.init(feedError)
        }
    }

    private static func describe(_ error: FeedError) -> String {
        switch error {
        case .postNotFound: "\(error). See 'feedsync feed' for ids."
        case .userNotFound: "\(error). See 'feedsync user list', or create it with 'feedsync user add ID'."
        case .userAlreadyExists: "\(error). See 'feedsync user list'."
        case .postAlreadyExists: "\(error). Choose another --id, or leave it out to generate one."
        case .invalidValue, .invalidLimit: "\(error)."
        case .forbidden: "\(error). Run the command as that post's author, or without --user as the operator."
        case .storage(let storage): describe(storage)
        case .databaseReplaced: "\(error)."
        case .subscriberTaken: "\(error). Stop the other instance, or try again later."
        case .historyPruned(let after, let prunedThrough):
            "the events after seq \(after) are no longer in the log (pruned through \(prunedThrough)). Pass --since "
                + "\(prunedThrough) or later, or leave --since out, to print what the log holds."
        case .historyRewritten:
            "\(error). Start again without --since (or from a seq the log holds) to print the log as it is now."
        case .handlerFailed, .serviceClosed, .cancelled: "\(error)."
        }
    }

    private static func describe(_ error: StorageError) -> String {
        switch error {
        case .notADatabase(let path):
            "\(FeedError.quoted(path)) is not a FeedSync database (it was left untouched). Pass --db with another path."
        case .cannotOpen(let path, let reason):
            "cannot open database \(FeedError.quoted(path)): \(reason). Check the path and its permissions, or pass --db."
        case .readOnly(let path):
            "cannot write database \(FeedError.quoted(path)): it is read-only for this user (the permissions of the file "
                + "or its directory, or a read-only file system); nothing was written. Check them, or pass --db."
        case .notPrimary(let location):
            "the server of \(FeedError.quoted(location)) takes no writes: it is a read-only standby (or its sessions are "
                + "read-only); nothing was written. Point --db at the primary, or list every server with "
                + "target_session_attrs=read-write, and try again."
        case .corrupt(let path):
            "database \(FeedError.quoted(path)) is damaged (SQLite reports it malformed). Restore it from a backup, or pass --db."
        case .ioError(let path, let code):
            "cannot write \(FeedError.quoted(path)): I/O error (SQLite code \(code)); nothing was written. Check free disk space and file size limits."
        case .diskFull(let path):
            "the disk is full while writing \(FeedError.quoted(path)); nothing was written. Free some space and try again."
        case .busy:
            "the database stayed locked by another process beyond the busy timeout. Try again."
        case .connectionLost(let location, let reason):
            "no connection to \(FeedError.quoted(location)) (\(oneLine(reason))); nothing was committed by this command. "
                + "Check the URL and that the server is up, then try again."
        case .timedOut:
            "\(error); nothing was written. Try again, or raise the statement timeout."
        case .unsupportedLocation:
            "\(error)."
        case .databaseReplaced:
            "\(error). Start again to follow the new file."
        case .schemaNewer(let database, let binary):
            "the database's schema version \(database) is newer than this feedsync (up to \(binary)). Upgrade feedsync."
        case .unknownEventKind:
            "\(error). Upgrade feedsync to read it."
        case .unknownMigration, .migrationChanged:
            "\(error). Use the feedsync that wrote this database."
        case .userNotFound(let id): describe(FeedError.userNotFound(id))
        case .postNotFound(let id): describe(FeedError.postNotFound(id))
        case .userAlreadyExists(let id): describe(FeedError.userAlreadyExists(id))
        case .postAlreadyExists(let id): describe(FeedError.postAlreadyExists(id))
        case .migrationsPending:
            "\(error). Run 'feedsync init' to migrate it."
        default:
            "\(error). Run 'feedsync check' to inspect the database."
        }
    }

    /// A server's multi-line message on one line: runs of whitespace become one space.
    private static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }
}
