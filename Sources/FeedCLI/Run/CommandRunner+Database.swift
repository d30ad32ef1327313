internal import FeedJSON
internal import FeedSync
internal import Foundation

extension CommandRunner {
    /// `init`: create or migrate; harmless twice.
    func initialize() throws(CLIError) -> ExitCode {
        let path = context.settings.databaseDisplay
        let existed: Bool
        if case .sqliteFile(let file) = context.settings.location {
            existed = FileManager.default.fileExists(atPath: file)
        } else {
            // A server database exists before `init`; "created" means its schema was.
            existed =
                (try? context.openBackend(mode: .inspect)).map { backend in
                    defer { backend.close() }
                    return ((try? backend.schemaStatus())?.databaseVersion ?? 0) > 0
                } ?? false
        }
        let service = try context.openService(create: true)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let status = try attempt { () throws(FeedError) in try service.status() }
        if json {
            printJSON(
                .object([
                    ("path", .string(path)), ("schemaVersion", .number(status.schemaVersion)), ("created", .bool(!existed)),
                ]))
        } else {
            let verb = existed ? "Database is ready" : "Created database"
            console.line("\(verb): \(TextSanitizer.clean(path)) (schema version \(status.schemaVersion))")
        }
        return .success
    }

    /// `status`: path, schema version, pending migrations, counts, last seq — read without migrating or writing
    /// anything, so the pending migrations are the database's real ones. The counts need the current schema: on a
    /// database that needs migrating they are not shown (`null` in JSON) and a hint on stderr points to `init`.
    ///
    /// On a replica it adds where the replica syncs from (never with a password), as whom, its queue and cursor.
    func status() throws(CLIError) -> ExitCode {
        let backend = try context.openBackend(mode: .inspect)
        // A service over the backend reads a replica's status; closing it closes the backend.
        var service: FeedService?
        defer {
            // on SQLite the last connection to close removes the -wal and -shm files reading created
            if let service { service.close() } else { backend.close() }
        }
        let status: StatusReport
        do {
            status = try StatusReport(backend)
        } catch {
            throw CLIError(FeedError.wrap(error))
        }
        var replica: ReplicaStatus?
        if status.counts != nil {
            let opened = try attempt { () throws(FeedError) in
                try FeedService(backend: backend, configuration: FeedService.Configuration(logger: context.logger))
            }
            service = opened
            replica = try attempt { () throws(FeedError) in try opened.replicaStatus() }
        }
        if json {
            printJSON(JSONShapes.status(status, replica: replica))
        } else {
            let count: (Int?) -> String = { $0.map(String.init) ?? "-" }
            var table = TextTable(headers: ["", ""], alignments: [.left, .left])
            table.rows = [
                ["database", TextSanitizer.clean(status.path)],
                ["backend", status.backend],
            ]
            if let server = status.server {
                table.rows.append([
                    "server", TextSanitizer.clean(server.address) + (server.isPrimary ? " (primary)" : " (standby: read-only)"),
                ])
            }
            table.rows += [
                ["schema version", "\(status.schemaVersion) (this feedsync: \(status.binarySchemaVersion))"],
                ["pending migrations", String(status.pendingMigrations.count)],
                ["users", count(status.counts?.users)],
                ["posts", count(status.counts?.posts)],
                ["likes", count(status.counts?.likes)],
                ["events", count(status.counts?.events)],
                ["last seq", status.counts.map { String($0.lastSeq) } ?? "-"],
            ]
            if let replica {
                table.rows += [
                    ["replica of", TextSanitizer.clean(replica.replicaOf)],
                    ["replica user", TextSanitizer.clean(replica.user)],
                    ["pending changes", String(replica.pendingChanges)],
                    ["rejected changes", String(replica.rejectedChanges)],
                    ["last synced seq", String(replica.lastSyncedSeq)],
                    ["last sync", replica.lastSyncAt.map(ISOTime.format) ?? "never"],
                ]
                if let error = replica.lastError { table.rows.append(["last sync error", TextSanitizer.clean(error)]) }
            }
            printLines(Array(table.lines().dropFirst()))
        }
        if let next = status.pendingMigrations.first {
            let count = status.pendingMigrations.count
            let what = count == 1 ? "migration \(next.version)" : "\(count) migrations, from \(next.version)"
            console.error(
                "The database needs \(what) (\(TextSanitizer.clean(next.name))): run 'feedsync init' to apply "
                    + (count == 1 ? "it" : "them") + "; commands that only read refuse the database until then.")
        }
        return .success
    }

    /// `check`: 0 when every invariant holds, 1 listing each violation.
    func check() throws(CLIError) -> ExitCode {
        let service = try context.openServiceForCheck()
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let violations = try attempt { () throws(FeedError) in try service.check() }
        if json {
            printJSON(
                .object([
                    ("ok", .bool(violations.isEmpty)),
                    ("violations", .array(violations.map { .object([("rule", .string($0.rule)), ("detail", .string($0.detail))]) })),
                ]))
        } else if violations.isEmpty {
            console.line("ok: integrity, like counts, log order, log replay and no trace of anything deleted all hold")
        } else {
            printLines(violations.map { TextSanitizer.clean($0.description) })
        }
        return violations.isEmpty ? .success : .violations
    }
}

/// What `status` reports, read in one snapshot of a database opened without migrating.
struct StatusReport: Sendable, Hashable {
    /// Row counts and the last seq.
    struct Counts: Sendable, Hashable {
        let users: Int, posts: Int, likes: Int, events: Int
        let lastSeq: Int64
    }

    /// The database file as given, or the URL without its password.
    let path: String
    /// `SQLite` or `PostgreSQL`.
    let backend: String
    /// The server reached, on PostgreSQL.
    let server: DatabaseServer?
    /// The database's schema version.
    let schemaVersion: Int
    /// The newest schema version this binary knows.
    let binarySchemaVersion: Int
    /// The migrations the database still needs, oldest first.
    let pendingMigrations: [MigrationName]
    /// The counts; `nil` when migrations are pending (the tables they read may not exist yet).
    let counts: Counts?

    /// Reads the report from `backend`; the counts in one read transaction.
    init(_ backend: any FeedBackend) throws {
        path = backend.traits.location
        self.backend = backend.traits.name
        server = try backend.read { tx in try tx.maintenance.server() }
        let schema = try backend.schemaStatus()
        schemaVersion = schema.databaseVersion
        binarySchemaVersion = schema.binaryVersion
        pendingMigrations = schema.pending
        guard pendingMigrations.isEmpty else {
            counts = nil
            return
        }
        counts = try backend.read { tx in
            let counts = try tx.maintenance.counts()
            return Counts(
                users: counts.users, posts: counts.posts, likes: counts.likes, events: counts.events, lastSeq: try tx.lastSeq())
        }
    }
}
