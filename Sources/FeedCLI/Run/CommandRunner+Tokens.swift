internal import FeedJSON
internal import FeedSync

extension CommandRunner {
    /// `token issue --user U [--label TEXT]`: the token alone on stdout (a note that it is shown once on stderr), or
    /// `{"id","user","token"}` with `--json`.
    func tokenIssue(_ command: TokenIssueCommand) throws(CLIError) -> ExitCode {
        guard let user = context.settings.userID else { throw CLIError(ParserError.missingUser(command: context.commandName)) }
        let service = try context.openService(create: false)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let issued = try attempt { () throws(FeedError) in try service.issueToken(userID: user, label: command.label) }
        if json {
            printJSON(JSONShapes.issuedToken(issued))
        } else {
            console.line(issued.token)
            console.error(
                "Token \(issued.id) acts as \(FeedError.quoted(issued.userID)). It is shown only this once: the database keeps "
                    + "only its hash. Revoke it with 'feedsync token revoke \(issued.id)'.")
        }
        return .success
    }

    /// `token list`: id, user, label, creation and revocation of every token; never a token or its hash.
    func tokenList() throws(CLIError) -> ExitCode {
        let service = try context.openService(create: false)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let tokens = try attempt { () throws(FeedError) in try service.tokens() }
        if json {
            printJSON(.object([("tokens", .array(tokens.map(JSONShapes.token)))]))
        } else if tokens.isEmpty {
            console.error("No tokens yet. Issue one with 'feedsync token issue --user ID'.")
        } else {
            var table = TextTable(headers: ["TOKEN", "USER", "LABEL", "CREATED", "REVOKED"], alignments: Array(repeating: .left, count: 5))
            table.rows = tokens.map {
                [
                    $0.id, TextSanitizer.clean($0.userID), TextSanitizer.shortened($0.label, width: 40), ISOTime.short($0.createdAt),
                    $0.revokedAt.map(ISOTime.short) ?? "-",
                ]
            }
            printLines(table.lines(header: context.style.bold))
        }
        return .success
    }

    /// `token revoke ID`: revokes a valid token; a revoked one is left as it is (exit 0); an unknown id exits 65.
    func tokenRevoke(_ command: TokenRevokeCommand) throws(CLIError) -> ExitCode {
        let service = try context.openService(create: false)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let revoked = try attempt { () throws(FeedError) in try service.revokeToken(id: command.id) }
        if !revoked {
            // An id of the right shape (checked by revokeToken), so quoting it shows no token.
            let known = try attempt { () throws(FeedError) in try service.tokens() }.contains { $0.id == command.id }
            guard known else {
                throw CLIError("no token \(FeedError.quoted(command.id)). See 'feedsync token list'.", exitCode: .data)
            }
        }
        if json {
            printJSON(.object([("id", .string(command.id)), ("revoked", .bool(true)), ("changed", .bool(revoked))]))
        } else {
            console.line(revoked ? "Revoked token \(command.id)." : "Token \(command.id) was revoked already.")
        }
        return .success
    }
}
