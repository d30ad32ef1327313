import FeedSync
import Foundation

#if PostgreSQL
    import FeedPostgresBackend
#endif

/// Which backend a workload runs on: a SQLite file in a fresh temporary directory (the default), or, with
/// `--db postgresql://…`, a fresh database that the bench creates on that server for the run and drops afterwards
/// (`--keep` keeps it, and says which on stderr). The URL's role needs `CREATEDB`. The URL is only ever printed
/// without its password.
struct BackendChoice {
    /// The server URL given with `--db`, or `nil` for SQLite.
    let serverURL: String?
    /// `--keep`: leave the PostgreSQL database in place after the run.
    let keep: Bool
    /// SQLite: `--checkpoint background` (the default) or `inline` (SQLite's automatic checkpoint, for comparison).
    let backgroundCheckpoints: Bool

    /// Reads `--db` and `--keep` (call before `args.finish()`).
    init(_ args: Arguments) throws {
        keep = try args.flag("keep")
        let checkpoint = args.string("checkpoint", "background")
        guard checkpoint == "background" || checkpoint == "inline" else {
            throw BenchError("--checkpoint must be background or inline, got \(checkpoint)")
        }
        backgroundCheckpoints = checkpoint == "background"
        if let url = args.optionalString("db") {
            guard case .postgreSQL = try? FeedLocation(url) else {
                throw BenchError("--db needs a postgresql:// URL, got \(FeedLocation.redacted(url))")
            }
            #if !PostgreSQL
                throw BenchError("--db needs the PostgreSQL trait (this feedsync-bench was built without it)")
            #endif
            serverURL = url
        } else {
            guard !keep else { throw BenchError("--keep applies only with --db") }
            serverURL = nil
        }
    }

    /// `"postgresql"` or `"sqlite"`, for the JSON line's `backend`.
    var name: String { serverURL == nil ? "sqlite" : "postgresql" }

    /// Adds `backend` to a result line, and for SQLite `checkpoint` (`background` or `inline`).
    func addKeys(to line: inout JSONLine) {
        line.add("backend", name)
        if serverURL == nil { line.add("checkpoint", backgroundCheckpoints ? "background" : "inline") }
    }

    /// A fresh, empty database for one run; `file` names the SQLite file.
    func makeDatabase(file: String) throws -> BenchDatabase {
        guard let serverURL else { return try BenchDatabase(sqliteFile: file, backgroundCheckpoints: backgroundCheckpoints) }
        return try BenchDatabase(server: serverURL, keep: keep)
    }
}

/// One run's database: open it with ``open()``, and ``remove()`` it after the service is closed.
final class BenchDatabase {
    /// What ``FeedService/init(location:options:bridge:logger:)`` opens: a file path or a PostgreSQL URL (with its
    /// password: never print it, use ``FeedLocation/redacted(_:)``).
    let location: String
    private let directory: TempDirectory?
    private let server: String?
    private let databaseName: String?
    private let keep: Bool
    private let options: FeedOpenOptions

    init(sqliteFile file: String, backgroundCheckpoints: Bool) throws {
        var options = FeedOpenOptions()
        options.backgroundCheckpoints = backgroundCheckpoints
        self.options = options
        let directory = try TempDirectory()
        self.directory = directory
        location = directory.file(file)
        server = nil
        databaseName = nil
        keep = false
    }

    init(server: String, keep: Bool) throws {
        #if PostgreSQL
            var generator = SystemRandomNumberGenerator()
            let name = "feedsync_bench_" + String(generator.next() as UInt64, radix: 16)
            try PostgresAdmin.createDatabase(url: server, name: name)
            location = PostgresAdmin.url(server, database: name)
            databaseName = name
        #else
            throw BenchError("--db needs the PostgreSQL trait")
        #endif
        directory = nil
        self.server = server
        self.keep = keep
        options = FeedOpenOptions()
    }

    /// Whether the run's database is a PostgreSQL database (``location`` is then its URL).
    var isPostgreSQL: Bool { server != nil }

    /// Opens the run's database (SQLite: created and migrated; PostgreSQL: migrated).
    func open() throws -> FeedService {
        try FeedService(location: location, options: options)
    }

    /// Deletes the temporary directory, or drops the PostgreSQL database unless `--keep` was given.
    func remove() {
        directory?.remove()
        #if PostgreSQL
            guard let server, let databaseName else { return }
            if keep {
                note("kept database \(databaseName) at \(FeedLocation.redacted(location))")
                return
            }
            do {
                try PostgresAdmin.dropDatabase(url: server, name: databaseName)
            } catch {
                note("could not drop database \(databaseName): \(error)")
            }
        #endif
    }
}
