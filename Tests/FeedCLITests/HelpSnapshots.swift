/// Expected long help texts, kept beside the tests (the short ones are inline in the tests).
enum HelpSnapshots {
    static let overview = """
        feedsync — a feed with likes on a SQLite file or a PostgreSQL database, synced across processes and machines.

        Usage: feedsync <command> [options]

        Commands:
          init          Create or migrate the database; prints its path and schema version.
          status        Show the database's path, schema version, pending migrations, counts and last seq.
          user add      Create a user.
          user list     List the users, ordered by id.
          user delete   Erase a user: their posts, likes, tokens and replicas' sync records; the log no longer names them.
          post add      Create a post; prints its id.
          post delete   Delete a post with its likes, as the operator (any post).
          feed          Show the feed, newest first, with ❤️ on the posts the viewer likes.
          show          Show one post: text, author, time, likes, and whether the viewer likes it.
          like          Like a post (liking a liked post changes nothing).
          unlike        Take a like back (unliking an unliked post changes nothing).
          toggle        Like the post if the user does not like it yet, else take the like back.
          events        Print the event log, oldest first.
          watch         Show the feed and keep it current while other processes change it.
          app           The interactive feed → detail → like → back flow (reads commands from stdin).
          seed          Fill an empty database with deterministic sample data through the bulk path.
          check         Check integrity and invariants; exit status 1 lists each violation.
          replica init  Make a new or empty SQLite database a replica of another database for one user, and sync it once.
          sync          Sync a replica with its source: push its local changes, then pull the source's.
          token issue   Issue an API token for a user (for 'feedsync serve'); prints it once.
          token list    List the API tokens: id, user, label, creation and revocation (never the token).
          token revoke  Revoke an API token: every server refuses it from its next request.
          serve         Serve the database over HTTP: a JSON API, an event stream and a live page.
          demo          Play the feed → detail → like → back flow on sample data, with narration.
          completions   Print the completion script for a shell (bash, zsh or fish) on stdout.

        Global options (anywhere on the line):
          --db PATH   The database: a SQLite file or a PostgreSQL URL (default: $FEEDSYNC_DB, else the per-user data directory).
          --user ID   The acting user (default: $FEEDSYNC_USER).
          --json      Print JSON instead of text.
          --no-color  No colour (also when NO_COLOR is set or stdout is not a terminal).
          --help      Show help (-h).
          --version   Show the version.

        Environment: FEEDSYNC_DB, FEEDSYNC_USER, NO_COLOR, XDG_DATA_HOME, FEEDSYNC_BUSY_TIMEOUT_MS,
        FEEDSYNC_RESPONSE_TIMEOUT_MS, FEEDSYNC_LOG (debug, info, warning or error: log lines on stderr).
        Exit status: 0 ok, 1 check found violations, 64 usage, 65 data, 66 history pruned, 74 database or I/O, 75 busy or unreachable.

        Start with 'feedsync demo'. See 'feedsync <command> --help' for details.

        """
}

/// The version the binary should print.
enum FeedSyncCLIVersion {
    static let expected = "0.1.0"
}
